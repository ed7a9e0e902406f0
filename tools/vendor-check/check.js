// The vendor conformance checker used by tests/common/vendor_check.rs: a small HTTP service on
// 127.0.0.1 that checks one recorded exchange (a request a fake server received and the answer
// it gave) against a vendor's own API description in tools/vendor-specs.
//
//   node check.js <specs-dir> <port>
//   POST /check/<vendor>  {method, path, query, headers: [[k, v]], body, response?}
//     -> {operation, request: [violation], response: [violation]}
//
// REST descriptions (gitea, gitlab, jira) go through Prism's own router and validators
// (@stoplight/prism-http), plus two checks Prism leaves out: a query parameter the operation
// does not declare, and a response property the schema does not declare (so a field the vendor
// never sends cannot be read from a fake). Linear's GraphQL requests are checked by graphql-js
// against the SDL: the document (validate), its variables (coercion), and the fake's answer by
// executing the document over the answer's own data. Each description is loaded on first use.
'use strict';

const http = require('http');
const fs = require('fs');
const path = require('path');
const { getHttpOperationsFromSpec } = require('@stoplight/prism-http');
const { validateInput, validateOutput, validateSecurity } = require('@stoplight/prism-http/dist/validator');
const route = require('@stoplight/prism-http/dist/router').default;
const graphql = require('graphql');
const { getVariableValues } = require('graphql/execution/values');

const SPECS = {
  gitea: { file: 'gitea-1.27.1-swagger.v1.json', basePath: '/api/v1' },
  gitlab: { file: 'gitlab-openapi_v2.yaml', basePath: '' },
  jira: { file: 'jira-cloud-platform-swagger-v3.v3.json', basePath: '' },
  linear: { file: 'linear-schema.graphql', graphql: true },
};
/** Longest request body this service reads (a recorded exchange with its answer). */
const MAX_BODY = 16 * 1024 * 1024;

const [specsDir, port] = process.argv.slice(2);
const loaded = new Map();

function load(vendor) {
  if (!loaded.has(vendor)) {
    const spec = SPECS[vendor];
    const file = path.join(specsDir, spec.file);
    const p = spec.graphql
      ? Promise.resolve({ schema: graphql.buildSchema(fs.readFileSync(file, 'utf8')) })
      : getHttpOperationsFromSpec(file).then(ops => ({ ops }));
    loaded.set(vendor, p);
  }
  return loaded.get(vendor);
}

function parseQuery(raw) {
  const out = {};
  const order = [];
  for (const part of (raw || '').split('&').filter(Boolean)) {
    const [k, v = ''] = part.split(/=(.*)/s);
    const key = decodeURIComponent(k.replace(/\+/g, ' '));
    const val = decodeURIComponent(v.replace(/\+/g, ' '));
    if (key in out) out[key] = [].concat(out[key], val);
    else { out[key] = val; order.push(key); }
  }
  return { query: out, order };
}

function headerObject(pairs) {
  const out = {};
  for (const [k, v] of pairs || []) out[k.toLowerCase()] = v;
  return out;
}

function parseBody(text, headers) {
  if (text === undefined || text === null || text === '') return undefined;
  const type = headers['content-type'] || '';
  if (type.includes('json')) {
    try { return JSON.parse(text); } catch (e) { return text; }
  }
  return text;
}

/** Prism's errors (not its warnings), array positions folded, each once. */
function words(diags) {
  const out = diags
    .filter(d => d.severity === 0 || d.severity === undefined)
    .map(d => `${(d.path || []).map(p => (/^\d+$/.test(p) ? '[]' : p)).join('.') || 'request'}: ${d.message}`);
  return [...new Set(out)];
}

/** The description's words for a schema at a JSON path: its `description`, when it has one. */
function describe(schema, pathParts) {
  let s = schema;
  for (const p of pathParts) {
    if (!s) return '';
    if (s.properties && s.properties[p]) s = s.properties[p];
    else if (s.items && /^\d+$/.test(p)) s = s.items;
    else return '';
  }
  return (s && s.description) ? ` (the description says: "${s.description.split('\n')[0].slice(0, 200)}")` : '';
}

function mergedProperties(schema) {
  const props = {};
  let open = false;
  const visit = s => {
    if (!s || typeof s !== 'object') return;
    if (s.properties) Object.assign(props, s.properties);
    if (s.additionalProperties !== undefined && s.additionalProperties !== false) open = true;
    if (s.anyOf || s.oneOf) open = true;
    for (const sub of s.allOf || []) visit(sub);
  };
  visit(schema);
  return { props, open };
}

/** Response properties the schema does not declare, depth first. */
function undeclared(value, schema, where, out) {
  if (!schema || typeof schema !== 'object' || out.length > 20) return;
  if (Array.isArray(value)) {
    if (schema.items) value.forEach(v => undeclared(v, schema.items, `${where}[]`, out));
    return;
  }
  if (!value || typeof value !== 'object') return;
  const { props, open } = mergedProperties(schema);
  if (Object.keys(props).length === 0) return;
  for (const [k, v] of Object.entries(value)) {
    if (props[k]) undeclared(v, props[k], `${where}.${k}`, out);
    else if (!open) {
      const text = `${where}.${k}: property "${k}" is not in the description's schema, so the vendor does not send it`;
      if (!out.includes(text)) out.push(text);
    }
  }
}

/** A null optional property reads as absent: Swagger 2.0 has no way to say nullable, and the
 * vendors' generated descriptions do not mark the fields their servers send as null. */
function dropNulls(value, schema) {
  if (Array.isArray(value)) return value.map(v => dropNulls(v, schema && schema.items));
  if (!value || typeof value !== 'object') return value;
  const { props } = mergedProperties(schema || {});
  const required = new Set((schema && schema.required) || []);
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === null && !required.has(k)) continue;
    out[k] = dropNulls(v, props[k]);
  }
  return out;
}

function checkRest(ops, basePath, x) {
  let p = x.path;
  if (basePath && p.startsWith(basePath + '/')) p = p.slice(basePath.length);
  const headers = headerObject(x.headers);
  const { query, order } = parseQuery(x.query);
  const input = {
    method: x.method.toLowerCase(),
    url: { path: p, query },
    headers,
    body: parseBody(x.body, headers),
  };
  const routed = route({ resources: ops, input });
  if (routed._tag === 'Left') {
    const e = routed.left;
    return { operation: null, request: [`${x.method} ${x.path}: ${e.name || 'NO_MATCH'}: ${e.detail || e.message}`], response: [] };
  }
  const op = routed.right;
  const operation = `${op.method.toUpperCase()} ${op.path} (${op.iid || op.id}: ${op.summary || ''})`;
  const request = [];
  const input2 = validateInput({ resource: op, element: input });
  if (input2._tag === 'Left') {
    const bodySchema = op.request && op.request.body && op.request.body.contents && op.request.body.contents[0] && op.request.body.contents[0].schema;
    for (const d of input2.left) {
      if (d.severity !== 0 && d.severity !== undefined) continue;
      const where = (d.path || []).join('.') || 'request';
      const said = d.path && d.path[0] === 'body' ? describe(bodySchema, d.path.slice(1)) : '';
      request.push(`${where}: ${d.message}${said}`);
    }
  }
  const declared = new Set(((op.request && op.request.query) || []).map(q => q.name));
  for (const k of order) {
    if (!declared.has(k)) request.push(`query.${k}: query parameter "${k}" is not declared by the operation (it declares: ${[...declared].join(', ') || 'none'})`);
  }
  const sec = validateSecurity({ resource: op, element: input });
  if (sec._tag === 'Left') request.push(...words(sec.left).map(w => `security: ${w}`));
  const response = x.response ? checkRestResponse(op, x.response) : [];
  return { operation, request, response };
}

function checkRestResponse(op, r) {
  const headers = headerObject(r.headers);
  const status = r.status;
  const spec = op.responses.find(s => s.code === String(status))
    || op.responses.find(s => s.code.toLowerCase() === `${String(status)[0]}xx`)
    || op.responses.find(s => s.code === 'default');
  const schema = spec && spec.contents && spec.contents[0] && spec.contents[0].schema;
  let body = parseBody(r.body, headers);
  if (body !== undefined && typeof body !== 'string') body = dropNulls(body, schema);
  if (!spec) {
    // As Prism rules: an undescribed success is an error; an undescribed failure (a 401, a
    // 429, a 5xx the description does not list) is a vendor's prerogative and not checked.
    return status < 300
      ? [`status ${status}: not among the answers the operation describes (${op.responses.map(s => s.code).join(', ')})`]
      : [];
  }
  if (body === undefined && (status === 204 || status === 205)) {
    // No Content: there is no body, so no media type, to hold against the description.
    return [];
  }
  if (!schema && !(spec.contents || []).length) {
    // The description gives this status without a body; a body sent anyway is not read.
    return [];
  }
  const out = [];
  const checked = validateOutput({ resource: op, element: { statusCode: status, headers, body } });
  if (checked._tag === 'Left') out.push(...words(checked.left));
  if (schema && body !== undefined && status < 300) undeclared(body, schema, 'body', out);
  return out;
}

function checkGraphql(schema, x) {
  let req;
  try { req = JSON.parse(x.body || ''); } catch (e) { return { operation: null, request: [`body: not JSON: ${e.message}`], response: [] }; }
  let doc;
  try { doc = graphql.parse(req.query || ''); } catch (e) { return { operation: null, request: [`query: ${e.message}`], response: [] }; }
  const op = doc.definitions.find(d => d.kind === 'OperationDefinition');
  const operation = op ? `${op.operation} ${op.name ? op.name.value : '(anonymous)'}` : 'no operation';
  const request = graphql.validate(schema, doc).map(e => `document: ${e.message}`);
  if (request.length === 0 && op) {
    const coerced = getVariableValues(schema, op.variableDefinitions || [], req.variables || {});
    if (coerced.errors) request.push(...coerced.errors.map(e => `variables: ${e.message}`));
    const declared = new Set((op.variableDefinitions || []).map(v => v.variable.name.value));
    for (const k of Object.keys(req.variables || {})) {
      if (!declared.has(k)) request.push(`variables: "${k}" is not a variable of the document`);
    }
  }
  const response = request.length === 0 && x.response ? checkGraphqlResponse(schema, doc, req, x.response) : [];
  return { operation, request, response };
}

/** Executes the document over the fake's `data` (each field read by its response key), so
 * graphql-js checks every value against the schema's types; a key the document did not select
 * is reported too. */
function checkGraphqlResponse(schema, doc, req, r) {
  if (r.status !== 200) return [];
  let body;
  try { body = JSON.parse(r.body || ''); } catch (e) { return [`body: not JSON: ${e.message}`]; }
  if (!body || typeof body !== 'object' || body.data === undefined || body.data === null) return [];
  const result = graphql.executeSync({
    schema, document: doc, rootValue: body.data, variableValues: req.variables || {},
    fieldResolver: (source, _args, _ctx, info) => (source ? source[info.path.key] : undefined),
    typeResolver: (value) => value && value.__typename,
  });
  const out = [...new Set((result.errors || []).map(e =>
    `data.${(e.path || []).map(p => (typeof p === 'number' ? '[]' : p)).join('.')}: ${e.message}`))];
  extraKeys(body.data, result.data, 'data', out);
  return out;
}

function extraKeys(sent, selected, where, out) {
  if (Array.isArray(sent) && Array.isArray(selected)) {
    sent.forEach((v, i) => extraKeys(v, selected[i], `${where}[]`, out));
    return;
  }
  if (!sent || typeof sent !== 'object' || !selected || typeof selected !== 'object') return;
  for (const [k, v] of Object.entries(sent)) {
    const text = `${where}.${k}: not selected by the document, so the vendor does not send it`;
    if (!(k in selected)) { if (!out.includes(text)) out.push(text); }
    else extraKeys(v, selected[k], `${where}.${k}`, out);
  }
}

async function handle(vendor, x) {
  const spec = SPECS[vendor];
  if (!spec) throw new Error(`unknown vendor ${vendor}`);
  const d = await load(vendor);
  return spec.graphql ? checkGraphql(d.schema, x) : checkRest(d.ops, spec.basePath, x);
}

const server = http.createServer((req, res) => {
  const m = /^\/check\/([a-z]+)$/.exec(req.url);
  if (req.method === 'GET' && req.url === '/health') { res.end('ok'); return; }
  if (req.method !== 'POST' || !m) { res.statusCode = 404; res.end(); return; }
  const chunks = [];
  let size = 0;
  req.on('data', c => {
    size += c.length;
    if (size > MAX_BODY) { res.statusCode = 413; res.end(); req.destroy(); return; }
    chunks.push(c);
  });
  req.on('end', async () => {
    if (res.writableEnded) return;
    try {
      const out = await handle(m[1], JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(out));
    } catch (e) {
      res.statusCode = 500;
      res.end(String(e && e.stack || e));
    }
  });
});
server.listen(Number(port), '127.0.0.1', () => {
  console.log(`vendor-check listening on 127.0.0.1:${server.address().port}`);
});
