//! Parse-time checks and the AST rewrite that makes field access strict.
//!
//! Go rejects unknown functions when parsing and fails on a field of nil when executing; gotmpl
//! does neither, so the parsed tree is checked here and every field chain is rewritten into a
//! call of [`FIELD_FN`](super::functions::FIELD_FN).

use gotmpl::parse::{BranchNode, CommandNode, Expr, ListNode, Node, PipeNode, Pos, SmolStr};

use super::functions::{FIELD_FN, KNOWN_FUNCTIONS};

/// The first identifier that names no known function, with its template line.
pub(crate) fn unknown_function(list: &ListNode) -> Option<(usize, String)> {
    let mut found = None;
    visit_list(list, &mut |expr| {
        if found.is_none()
            && let Expr::Identifier(pos, name) = expr
            && !KNOWN_FUNCTIONS.contains(&name.as_str())
        {
            found = Some((pos.line, name.to_string()));
        }
    });
    found
}

fn visit_list(list: &ListNode, f: &mut dyn FnMut(&Expr)) {
    for node in &list.nodes {
        visit_node(node, f);
    }
}

fn visit_node(node: &Node, f: &mut dyn FnMut(&Expr)) {
    match node {
        Node::List(l) => visit_list(l, f),
        Node::Action(a) => visit_pipe(&a.pipe, f),
        Node::If(b) | Node::Range(b) | Node::With(b) => {
            visit_pipe(&b.pipe, f);
            visit_list(&b.body, f);
            if let Some(e) = &b.else_body {
                visit_list(e, f);
            }
        }
        Node::Template(t) => {
            if let Some(p) = &t.pipe {
                visit_pipe(p, f);
            }
        }
        Node::Define(d) => visit_list(&d.body, f),
        Node::Text(_) | Node::Break(_) | Node::Continue(_) => {}
    }
}

fn visit_pipe(pipe: &PipeNode, f: &mut dyn FnMut(&Expr)) {
    for cmd in &pipe.commands {
        for arg in &cmd.args {
            visit_expr(arg, f);
        }
    }
}

fn visit_expr(expr: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(expr);
    match expr {
        Expr::Pipe(_, p) => visit_pipe(p, f),
        Expr::Chain(_, inner, _) => visit_expr(inner, f),
        _ => {}
    }
}

/// A copy of `list` where each field chain goes through the strict accessor.
pub(crate) fn rewrite_list(list: &ListNode) -> ListNode {
    ListNode {
        pos: list.pos,
        nodes: list.nodes.iter().map(rewrite_node).collect(),
    }
}

fn rewrite_branch(b: &BranchNode) -> BranchNode {
    BranchNode {
        pos: b.pos,
        pipe: rewrite_pipe(&b.pipe),
        body: rewrite_list(&b.body),
        else_body: b.else_body.as_ref().map(rewrite_list),
    }
}

fn rewrite_node(node: &Node) -> Node {
    match node {
        Node::List(l) => Node::List(rewrite_list(l)),
        Node::Action(a) => {
            let mut a = a.clone();
            a.pipe = rewrite_pipe(&a.pipe);
            Node::Action(a)
        }
        Node::If(b) => Node::If(rewrite_branch(b)),
        Node::Range(b) => Node::Range(rewrite_branch(b)),
        Node::With(b) => Node::With(rewrite_branch(b)),
        Node::Template(t) => {
            let mut t = t.clone();
            t.pipe = t.pipe.as_ref().map(rewrite_pipe);
            Node::Template(t)
        }
        Node::Define(d) => {
            let mut d = d.clone();
            d.body = rewrite_list(&d.body);
            Node::Define(d)
        }
        Node::Text(_) | Node::Break(_) | Node::Continue(_) => node.clone(),
    }
}

fn rewrite_pipe(pipe: &PipeNode) -> PipeNode {
    PipeNode {
        pos: pipe.pos,
        decl: pipe.decl.clone(),
        commands: pipe.commands.iter().map(rewrite_command).collect(),
        is_assign: pipe.is_assign,
    }
}

fn rewrite_command(cmd: &CommandNode) -> CommandNode {
    let args = cmd
        .args
        .iter()
        .enumerate()
        .map(|(i, arg)| match arg {
            // `fn.field` in command position is a call whose result is walked; leave it to gotmpl.
            Expr::Chain(_, inner, _) if i == 0 && matches!(**inner, Expr::Identifier(..)) => {
                arg.clone()
            }
            _ => rewrite_expr(arg),
        })
        .collect();
    CommandNode { pos: cmd.pos, args }
}

fn rewrite_expr(expr: &Expr) -> Expr {
    match expr {
        Expr::Field(pos, chain) => strict_call(*pos, Expr::Dot(*pos), "", chain),
        Expr::Variable(pos, name, chain) if !chain.is_empty() => strict_call(
            *pos,
            Expr::Variable(*pos, name.clone(), Vec::new()),
            name,
            chain,
        ),
        Expr::Chain(pos, inner, chain) => strict_call(*pos, rewrite_expr(inner), "(…)", chain),
        Expr::Pipe(pos, p) => Expr::Pipe(*pos, rewrite_pipe(p)),
        _ => expr.clone(),
    }
}

fn strict_call(pos: Pos, base: Expr, label: &str, chain: &[SmolStr]) -> Expr {
    let mut args = vec![
        Expr::Identifier(pos, SmolStr::new(FIELD_FN)),
        base,
        Expr::String(pos, label.into()),
    ];
    args.extend(
        chain
            .iter()
            .map(|key| Expr::String(pos, key.as_str().into())),
    );
    Expr::Pipe(
        pos,
        PipeNode {
            pos,
            decl: Vec::new(),
            commands: vec![CommandNode { pos, args }],
            is_assign: false,
        },
    )
}
