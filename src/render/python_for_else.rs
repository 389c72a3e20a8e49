//! jinja2's `for ... else`: the `else` block runs when no iteration reached the end of the loop's
//! body. jinja2 clears a flag as the last statement of the body, so an iteration that leaves at
//! `continue` or `break` does not clear it: a loop whose every iteration continues runs its
//! `else` block, and so does one that breaks in its first iteration. minijinja runs `else` only
//! for a loop that had nothing to iterate.
//!
//! Where a loop's body can leave early, the interpreter's source is rewritten to jinja2's rule:
//!
//! ```text
//! {% for x in xs %}BODY{% else %}ELSE{% endfor %}
//! {% set __sft_fe_N = namespace(done=false) %}{% for x in xs %}BODY{% set __sft_py_set = true|__sft_py_namespace_field(__sft_fe_N, 'done') %}{% endfor %}{% if not __sft_fe_N.done %}{% with %}ELSE{% endwith %}{% endif %}
//! ```
//!
//! Each tag keeps the whitespace control of the one it stands for: the first tag written in
//! place of a tag takes its left marker, the last its right one. `{% with %}` gives the `else`
//! block its own scope, as jinja2 does (a `set` there does not outlive it).

use minijinja::machinery::ast;

/// The edits (`start`, `end`, replacement) that give `f` jinja2's `else`, where its body can
/// leave an iteration early, its `else` block sets a variable or a loop filter binds the target
/// (none otherwise), or `None` where that cannot be written: a
/// recursive loop, or tags not found as written (other delimiters).
pub fn edits(source: &str, f: &ast::Spanned<ast::ForLoop>) -> Option<Vec<(usize, usize, String)>> {
    // A loop filter binds the loop's target where minijinja's `else` block still sees it.
    let filtered_else = f.filter_expr.is_some() && !f.else_body.is_empty();
    if !python_else_differs(f) && !else_sets(f) && !filtered_else {
        return Some(Vec::new());
    }
    if f.recursive {
        return None;
    }
    try_edits(source, f)
}

/// Whether jinja2's `else` can run where minijinja's would not: the loop has an `else` block
/// and its body a `continue` or `break` of its own.
pub fn python_else_differs(f: &ast::ForLoop) -> bool {
    !f.else_body.is_empty() && leaves_early(&f.body)
}

/// Whether the `else` block of `f` sets a variable that minijinja would let outlive it.
fn else_sets(f: &ast::ForLoop) -> bool {
    f.else_body
        .iter()
        .any(|s| matches!(s, ast::Stmt::Set(_) | ast::Stmt::SetBlock(_)))
}

fn try_edits(source: &str, f: &ast::Spanned<ast::ForLoop>) -> Option<Vec<(usize, usize, String)>> {
    let span = f.span();
    let (start, end) = (span.start_offset as usize, span.end_offset as usize);
    let flag = format!("__sft_fe_{start}");
    // The flag is set as every namespace assignment is rewritten (see `python_namespace`).
    let (discarded, field) = (
        super::python_namespace::DISCARDED,
        super::python_namespace::FIELD_FILTER,
    );
    // `{%- ` before `for`: the opening tag.
    let head = source
        .get(..start)?
        .trim_end_matches([' ', '\t', '\n', '\r']);
    let (open_mark, head) = split_mark_end(head);
    let open_at = head.strip_suffix("{%")?.len();
    // ` -%}` after `endfor`: the closing tag.
    if !source.get(..end)?.ends_with("endfor") {
        return None;
    }
    let close_start = source[..end - "endfor".len()].trim_end_matches([' ', '\t', '\n', '\r']);
    let (close_left, close_start) = split_mark_end(close_start);
    let close_at = close_start.strip_suffix("{%")?.len();
    let after = source
        .get(end..)?
        .trim_start_matches([' ', '\t', '\n', '\r']);
    let (close_right, after) = split_mark_start(after);
    let close_end = source.len() - after.strip_prefix("%}")?.len();
    // The `else` tag: the last one between the body's end and the else block's start.
    let body_end = match f.body.last() {
        Some(last) => stmt_span(last)?.end_offset,
        None => f.filter_expr.as_ref().unwrap_or(&f.iter).span().end_offset,
    } as usize;
    let else_limit = match f.else_body.first() {
        Some(s) => stmt_span(s)?.start_offset as usize,
        None => close_at,
    };
    let (else_at, else_end, else_left, else_right) =
        last_else_tag(source.get(body_end..else_limit)?)
            .map(|(a, b, l, r)| (body_end + a, body_end + b, l, r))?;
    // A `continue` or `break` of the enclosing loop may not leave a `with` block (minijinja
    // would lose track of its frames): such an `else` block keeps the loop's scope.
    let (with_open, with_close) = match leaves_early(&f.else_body) {
        true => (String::new(), String::new()),
        false => (
            format!("{{% with {else_right}%}}"),
            format!("{{%{close_left} endwith %}}"),
        ),
    };
    let (if_close_left, if_open_right) = match with_open.is_empty() {
        true => (close_left, else_right),
        false => ("", ""),
    };
    Some(vec![
        (
            open_at,
            open_at,
            format!("{{%{open_mark} set {flag} = namespace(done=false) %}}"),
        ),
        (
            else_at,
            else_end,
            format!(
                "{{%{else_left} set {discarded} = true|{field}({flag}, 'done') %}}{{% endfor %}}{{% if not {flag}.done {if_open_right}%}}{with_open}"
            ),
        ),
        (
            close_at,
            close_end,
            format!("{with_close}{{%{if_close_left} endif {close_right}%}}"),
        ),
    ])
}

/// Where `stmt` is written (`None` for the kinds a loop body cannot hold).
fn stmt_span(stmt: &ast::Stmt) -> Option<minijinja::machinery::Span> {
    Some(match stmt {
        ast::Stmt::EmitExpr(s) => s.span(),
        ast::Stmt::EmitRaw(s) => s.span(),
        ast::Stmt::ForLoop(s) => s.span(),
        ast::Stmt::IfCond(s) => s.span(),
        ast::Stmt::WithBlock(s) => s.span(),
        ast::Stmt::Set(s) => s.span(),
        ast::Stmt::SetBlock(s) => s.span(),
        ast::Stmt::AutoEscape(s) => s.span(),
        ast::Stmt::FilterBlock(s) => s.span(),
        ast::Stmt::Macro(s) => s.span(),
        ast::Stmt::CallBlock(s) => s.span(),
        ast::Stmt::Continue(s) => s.span(),
        ast::Stmt::Break(s) => s.span(),
        ast::Stmt::Do(s) => s.span(),
        _ => return None,
    })
}

/// Whether `body` holds a `continue` or `break` of its own loop (not of a loop inside it, and
/// not in a macro defined there).
pub fn leaves_early(body: &[ast::Stmt]) -> bool {
    body.iter().any(|s| match s {
        ast::Stmt::Continue(_) | ast::Stmt::Break(_) => true,
        ast::Stmt::IfCond(c) => leaves_early(&c.true_body) || leaves_early(&c.false_body),
        ast::Stmt::WithBlock(w) => leaves_early(&w.body),
        ast::Stmt::SetBlock(b) => leaves_early(&b.body),
        ast::Stmt::AutoEscape(a) => leaves_early(&a.body),
        ast::Stmt::FilterBlock(b) => leaves_early(&b.body),
        ast::Stmt::Block(b) => leaves_early(&b.body),
        // A loop's own `else` block belongs to the enclosing loop.
        ast::Stmt::ForLoop(inner) => leaves_early(&inner.else_body),
        _ => false,
    })
}

/// `text` without a whitespace-control marker at its end, and the marker.
fn split_mark_end(text: &str) -> (&str, &str) {
    match text.strip_suffix(['-', '+']) {
        Some(rest) => (&text[rest.len()..], rest),
        None => ("", text),
    }
}

/// `text` without a whitespace-control marker at its start, and the marker.
fn split_mark_start(text: &str) -> (&str, &str) {
    match text.strip_prefix(['-', '+']) {
        Some(rest) => (&text[..1], rest),
        None => ("", text),
    }
}

/// The last `{% else %}` tag in `gap`: its start, end, and left and right markers.
fn last_else_tag(gap: &str) -> Option<(usize, usize, &str, &str)> {
    let mut found = None;
    let mut from = 0;
    while let Some(at) = gap[from..].find("{%").map(|i| from + i) {
        from = at + 2;
        let (left, rest) = split_mark_start(&gap[at + 2..]);
        let Some(rest) = rest
            .trim_start_matches([' ', '\t', '\n', '\r'])
            .strip_prefix("else")
        else {
            continue;
        };
        let rest = rest.trim_start_matches([' ', '\t', '\n', '\r']);
        let (right, rest) = split_mark_start(rest);
        if let Some(tail) = rest.strip_prefix("%}") {
            found = Some((at, gap.len() - tail.len(), left, right));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::last_else_tag;

    #[test]
    fn finds_the_last_else_tag_with_its_markers() {
        assert_eq!(last_else_tag(" %}{% else %}"), Some((3, 13, "", "")));
        assert_eq!(
            last_else_tag("{# {% else %} #}{%- else +%}"),
            Some((16, 28, "-", "+"))
        );
        assert_eq!(last_else_tag("{% elsewhere %}"), None);
    }
}
