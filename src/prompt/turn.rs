//! Per-turn prompt assembly: the first turn renders the workflow's template (plus the status
//! protocol), continuation turns render it again with `.run` updated or fall back to a fixed
//! continuation prompt, because the agent resumes the same session and already has the task.

use crate::domain::Issue;

use super::{PromptData, PromptError, PromptTemplate, ReactionContext, RunInfo, StageValues};

/// What a turn's render carries besides the issue and the turn: the tool advertisement, the
/// pull-request reaction the run continues, and the run's place on a stage chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnContext<'a> {
    pub tool_advertisement: Option<&'a str>,
    pub reaction: Option<&'a ReactionContext>,
    pub stage: Option<&'a StageValues>,
}

/// Sent on a continuation turn whose render is empty: the agent is in the same session and
/// already has the task.
pub const CONTINUATION_PROMPT: &str = "Continue working on the task from the previous turn. \
Review the current state of the workspace and of your changes, finish any remaining work, \
and confirm that the task is complete and verified before you stop.";

/// Appended to every first-turn prompt: how the agent stops a run on its own through the
/// `.sortie/status` file (line 1 a token, the lines after it a statement for a person).
pub const STATUS_PROTOCOL_SUFFIX: &str = "\
## Stopping early: the `.sortie/status` file

If you cannot or should not finish this task, write a status file in the workspace root and \
end your turn; the run then stops and the issue waits for a person:

    mkdir -p .sortie && printf '%s\\n' '<token>' '<statement>' > .sortie/status

Line 1 must be exactly one of these tokens:

- `blocked`: you are stuck and cannot make progress without outside help (missing access, \
unclear or contradictory requirements, a broken dependency).
- `needs-human-review`: the work is done but a person must review it before it moves on.
- `no-change-needed`: the task needs no change (it is already done, cannot be reproduced, \
or asks for nothing in this repository).

The lines after the token are a short statement for the person who picks this up: why you \
stopped, and what you need from them or what they should check. For example:

    mkdir -p .sortie && printf '%s\\n' 'blocked' 'The ticket asks for both soft and hard delete.' 'Which one should the API expose?' > .sortie/status

Do not write this file during normal work. When you complete the task normally, just finish.";

/// The prompt of `turn` (1-based) without a tool advertisement; see
/// [`build_turn_prompt_with_tools`].
pub fn build_turn_prompt(
    t: &PromptTemplate,
    issue: &Issue,
    attempt: Option<u32>,
    turn: u32,
    max_turns: u32,
) -> Result<String, PromptError> {
    build_turn_prompt_with_tools(t, issue, attempt, turn, max_turns, None)
}

/// The prompt of `turn` (1-based). Turn 1: the render (even if empty), then the tool
/// advertisement when given, then [`STATUS_PROTOCOL_SUFFIX`]. Later turns: the render with
/// `run.is_continuation = true`, or [`CONTINUATION_PROMPT`] when it is blank; no suffixes.
pub fn build_turn_prompt_with_tools(
    t: &PromptTemplate,
    issue: &Issue,
    attempt: Option<u32>,
    turn: u32,
    max_turns: u32,
    tool_advertisement: Option<&str>,
) -> Result<String, PromptError> {
    build_turn_prompt_with_reaction(t, issue, attempt, turn, max_turns, tool_advertisement, None)
}

/// [`build_turn_prompt_with_tools`] for a run that continues a pull-request reaction: its
/// context renders as `.ci_failure` or `.review_comments` on every turn.
pub fn build_turn_prompt_with_reaction(
    t: &PromptTemplate,
    issue: &Issue,
    attempt: Option<u32>,
    turn: u32,
    max_turns: u32,
    tool_advertisement: Option<&str>,
    reaction: Option<&ReactionContext>,
) -> Result<String, PromptError> {
    let cx = TurnContext {
        tool_advertisement,
        reaction,
        stage: None,
    };
    build_turn_prompt_in(t, issue, attempt, (turn, max_turns), cx)
}

/// The prompt of `turn` out of `max_turns` (`turns`) with everything `cx` carries.
pub fn build_turn_prompt_in(
    t: &PromptTemplate,
    issue: &Issue,
    attempt: Option<u32>,
    turns: (u32, u32),
    cx: TurnContext<'_>,
) -> Result<String, PromptError> {
    let (turn, max_turns) = turns;
    let tool_advertisement = cx.tool_advertisement;
    let data = PromptData {
        issue,
        attempt,
        run: RunInfo::for_turn(turn, max_turns),
        reaction: cx.reaction,
        stage: cx.stage,
    };
    let rendered = t.render(&data)?;
    if turn > 1 {
        if rendered.trim().is_empty() {
            return Ok(CONTINUATION_PROMPT.to_string());
        }
        return Ok(rendered);
    }
    let mut prompt = rendered;
    if let Some(tools) = tool_advertisement.filter(|s| !s.trim().is_empty()) {
        prompt.push_str("\n\n");
        prompt.push_str(tools);
    }
    prompt.push_str("\n\n");
    prompt.push_str(STATUS_PROTOCOL_SUFFIX);
    Ok(prompt)
}
