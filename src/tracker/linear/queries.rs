//! The GraphQL operations sent, by operation name (the fake server dispatches on it). Nested
//! connections take an explicit `first` so a page of 50 issues stays well under Linear's
//! 10,000-point complexity limit per query.

/// The fields of every issue read.
macro_rules! issue_fields {
    () => {
        "id identifier title description priority url branchName createdAt updatedAt \
         state { name type } team { key } assignee { name } parent { id identifier } \
         labels(first: 20) { nodes { name } } \
         inverseRelations(first: 20) { nodes { type issue { id identifier state { name } } } pageInfo { hasNextPage } }"
    };
}

pub const ISSUES: &str = concat!(
    "query SortieIssues($team: String!, $states: [String!], $first: Int!, $after: String) { ",
    "issues(filter: { team: { key: { eq: $team } }, state: { name: { in: $states } } }, first: $first, after: $after) { ",
    "nodes { ",
    issue_fields!(),
    " } pageInfo { hasNextPage endCursor } } }"
);

/// [`ISSUES`] with the operator's `tracker.query_filter` (`$extra`) as one more condition.
pub const ISSUES_FILTERED: &str = concat!(
    "query SortieIssuesFiltered($team: String!, $states: [String!], $extra: IssueFilter!, $first: Int!, $after: String) { ",
    "issues(filter: { team: { key: { eq: $team } }, state: { name: { in: $states } }, and: [$extra] }, first: $first, after: $after) { ",
    "nodes { ",
    issue_fields!(),
    " } pageInfo { hasNextPage endCursor } } }"
);

pub const ISSUE: &str = concat!(
    "query SortieIssue($id: String!) { issue(id: $id) { ",
    issue_fields!(),
    " } }"
);

/// The issue with id `$id` if the team's issues matching the operator's filter hold it.
pub const ISSUE_IN_FILTER: &str = "query SortieIssueInFilter($id: ID!, $team: String!, $extra: IssueFilter!, $first: Int!, $after: String) { issues(filter: { id: { eq: $id }, team: { key: { eq: $team } }, and: [$extra] }, first: $first, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } }";

pub const STATES_BY_IDS: &str = "query SortieIssueStatesByIds($ids: [ID!], $first: Int!, $after: String) { issues(filter: { id: { in: $ids } }, first: $first, after: $after) { nodes { id identifier state { name } } pageInfo { hasNextPage endCursor } } }";

pub const STATES_BY_NUMBERS: &str = "query SortieIssueStatesByNumbers($team: String!, $numbers: [Float!], $first: Int!, $after: String) { issues(filter: { team: { key: { eq: $team } }, number: { in: $numbers } }, first: $first, after: $after) { nodes { id identifier state { name } } pageInfo { hasNextPage endCursor } } }";

pub const COMMENTS: &str = "query SortieComments($id: String!, $first: Int!, $after: String) { issue(id: $id) { comments(first: $first, after: $after) { nodes { id body createdAt user { name } } pageInfo { hasNextPage endCursor } } } }";

pub const BLOCKERS: &str = "query SortieBlockers($id: String!) { issue(id: $id) { id inverseRelations(first: 50) { nodes { type issue { id identifier state { name } } } pageInfo { hasNextPage } } } }";

pub const WORKFLOW_STATES: &str = "query SortieWorkflowStates($team: String!, $first: Int!, $after: String) { workflowStates(filter: { team: { key: { eq: $team } } }, first: $first, after: $after) { nodes { id name type } pageInfo { hasNextPage endCursor } } }";

pub const LABELS: &str = "query SortieLabels($name: String!, $first: Int!, $after: String) { issueLabels(filter: { name: { eqIgnoreCase: $name } }, first: $first, after: $after) { nodes { id name team { key } } pageInfo { hasNextPage endCursor } } }";

pub const UPDATE_STATE: &str = "mutation SortieIssueUpdate($id: String!, $stateId: String!) { issueUpdate(id: $id, input: { stateId: $stateId }) { success issue { id state { name } } } }";

pub const COMMENT_CREATE: &str = "mutation SortieCommentCreate($issueId: String!, $body: String!) { commentCreate(input: { issueId: $issueId, body: $body }) { success comment { id } } }";

pub const ADD_LABEL: &str = "mutation SortieIssueAddLabel($id: String!, $labelId: String!) { issueAddLabel(id: $id, labelId: $labelId) { success } }";

pub const REMOVE_LABEL: &str = "mutation SortieIssueRemoveLabel($id: String!, $labelId: String!) { issueRemoveLabel(id: $id, labelId: $labelId) { success } }";
