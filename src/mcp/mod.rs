//! `sortie mcp-server`: the stdio MCP tool server an agent session starts beside itself.
