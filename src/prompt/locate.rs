//! Finds the template line of a render error.
//!
//! gotmpl's execution errors carry no position, but a render error must point into WORKFLOW.md.
//! Rendering is pure, so the failing node is found by re-running shortened copies of the tree:
//! the first prefix of a list that fails ends with the culprit; a failing `if`/`with`/`range` is
//! narrowed to its pipeline, its body or its else branch the same way. Only runs on the error path.

use gotmpl::parse::{BranchNode, ListNode, Node};

/// Re-executes a candidate tree and says whether it fails.
pub(crate) type Probe<'a> = dyn Fn(&ListNode) -> bool + 'a;

/// Template line (1-based, before any offset) of the node whose execution fails, if found.
pub(crate) fn failing_line(tree: &ListNode, fails: &Probe<'_>) -> Option<usize> {
    locate_in(tree, &|l| l, fails)
}

fn empty_like(list: &ListNode) -> ListNode {
    ListNode {
        pos: list.pos,
        nodes: Vec::new(),
    }
}

fn locate_in(
    list: &ListNode,
    wrap: &dyn Fn(ListNode) -> ListNode,
    fails: &Probe<'_>,
) -> Option<usize> {
    let prefix = |len: usize| ListNode {
        pos: list.pos,
        nodes: list.nodes[..len].to_vec(),
    };
    let len = (1..=list.nodes.len()).find(|&len| fails(&wrap(prefix(len))))?;
    let before = &list.nodes[..len - 1];
    let with_culprit = |node: Node| {
        let mut nodes = before.to_vec();
        nodes.push(node);
        wrap(ListNode {
            pos: list.pos,
            nodes,
        })
    };
    match &list.nodes[len - 1] {
        Node::If(b) => locate_branch(b, Node::If, &with_culprit, fails),
        Node::With(b) => locate_branch(b, Node::With, &with_culprit, fails),
        Node::Range(b) => locate_branch(b, Node::Range, &with_culprit, fails),
        Node::List(inner) => locate_in(inner, &|l| with_culprit(Node::List(l)), fails),
        Node::Action(a) => Some(a.pos.line),
        Node::Template(t) => Some(t.pos.line),
        Node::Define(d) => Some(d.pos.line),
        Node::Text(t) => Some(t.pos.line),
        Node::Break(p) | Node::Continue(p) => Some(p.line),
    }
}

fn locate_branch(
    b: &BranchNode,
    make: fn(BranchNode) -> Node,
    with_culprit: &dyn Fn(Node) -> ListNode,
    fails: &Probe<'_>,
) -> Option<usize> {
    let shell = |body: ListNode, else_body: Option<ListNode>| {
        with_culprit(make(BranchNode {
            pos: b.pos,
            pipe: b.pipe.clone(),
            body,
            else_body,
        }))
    };
    let empty_else = b.else_body.as_ref().map(empty_like);
    if fails(&shell(empty_like(&b.body), empty_else.clone())) {
        return Some(b.pos.line);
    }
    if fails(&shell(b.body.clone(), empty_else.clone())) {
        return locate_in(&b.body, &|body| shell(body, empty_else.clone()), fails)
            .or(Some(b.pos.line));
    }
    match &b.else_body {
        Some(else_body) => locate_in(else_body, &|els| shell(b.body.clone(), Some(els)), fails)
            .or(Some(b.pos.line)),
        None => Some(b.pos.line),
    }
}
