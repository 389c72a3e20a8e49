//! Chained comparisons (`a < b in c`) as Python evaluates them: pair by pair, each pair with
//! Python's rules, the later pairs not compared once one is false.

use minijinja::machinery::ast;

use super::{applied, Walker};
use crate::render::python_semantics::CHAIN_FILTER;

impl Walker<'_> {
    /// A chained comparison `a < b == c` becomes `((a)|chain('<', b, '==', c))`: Python's
    /// comparisons pair by pair, stopping at the first false one (each raising where Python's
    /// does), where minijinja orders across types, where every operand after the second is a
    /// constant or a variable; otherwise pairs joined by `and` ([`Walker::chain_of_pairs`]).
    pub(super) fn chain(&mut self, c: &ast::Compare) {
        // Python stops at the first false pair without evaluating the operands after it; the
        // filter takes every operand evaluated, so an operand after the second must be one whose
        // evaluation cannot fail (a constant or a variable).
        let plain = |e: &ast::Expr| matches!(e, ast::Expr::Const(_) | ast::Expr::Var(_));
        if !c.ops.iter().skip(1).all(|op| plain(&op.expr)) {
            // Pairs joined by `and` instead: each middle operand written twice, which is the
            // same where evaluating it has no effect (a lookup, an operator, a filter).
            let middle = &c.ops[..c.ops.len() - 1];
            if middle.iter().all(|op| pure(&op.expr)) {
                self.chain_of_pairs(c);
            }
            return;
        }
        let mut edits = Vec::new();
        let mut left_end = c.expr.span().end_offset;
        for (k, op) in c.ops.iter().enumerate() {
            let Some((at, len, name)) = self.operator_spot(left_end, op) else {
                return;
            };
            let text = if k == 0 {
                format!(")|{CHAIN_FILTER}('{name}', ")
            } else {
                format!(", '{name}', ")
            };
            edits.push((at, at + len, text));
            left_end = op.expr.span().end_offset;
        }
        self.insert(self.start(&c.expr), "((".to_string());
        for (start, end, text) in edits {
            self.replace(start, end, text);
        }
        self.insert(left_end, "))".to_string());
    }

    /// `a < b > c` as `(((a)|chain('<', b)) and ((b)|chain('>', c)))`: Python's answer for
    /// each pair, the later pairs skipped once one is false, `b` written again as rewritten.
    fn chain_of_pairs(&mut self, c: &ast::Compare) {
        let mut spots = Vec::new();
        let mut left_end = c.expr.span().end_offset;
        for op in &c.ops {
            let Some(spot) = self.operator_spot(left_end, op) else {
                return;
            };
            spots.push(spot);
            left_end = op.expr.span().end_offset;
        }
        let mut edits = Vec::new();
        for (k, (at, len, name)) in spots.into_iter().enumerate() {
            let text = match k {
                0 => format!(")|{CHAIN_FILTER}('{name}', "),
                _ => {
                    let before = &c.ops[k - 1].expr;
                    let end = before.span().end_offset;
                    let start = written_start(self.source, self.start(before), end);
                    let Some(again) = self.rewritten(start, end) else {
                        return;
                    };
                    format!(")) and (({again})|{CHAIN_FILTER}('{name}', ")
                }
            };
            edits.push((at, at + len, text));
        }
        self.insert(self.start(&c.expr), "(((".to_string());
        for (start, end, text) in edits {
            self.replace(start, end, text);
        }
        self.insert(left_end, ")))".to_string());
    }

    /// Where the operator of `op` is written after its left operand's end, its length and
    /// Python's spelling; `None` where it is not written as expected.
    fn operator_spot(
        &self,
        left_end: u32,
        op: &ast::CompareOp,
    ) -> Option<(u32, u32, &'static str)> {
        let right_start = self.start(&op.expr);
        let between = self.source.get(left_end as usize..right_start as usize)?;
        let closing = between.len() - between.trim_start_matches([')', ' ', '\t', '\n']).len();
        let rest = &between[closing..];
        let (name, len) = match op.op {
            ast::CompareOpKind::Eq => ("==", 2),
            ast::CompareOpKind::Ne => ("!=", 2),
            ast::CompareOpKind::Lte => ("<=", 2),
            ast::CompareOpKind::Gte => (">=", 2),
            ast::CompareOpKind::Lt => ("<", 1),
            ast::CompareOpKind::Gt => (">", 1),
            ast::CompareOpKind::In => ("in", 2),
            ast::CompareOpKind::NotIn => ("not in", rest.find("in").map_or(0, |at| at + 2)),
        };
        let spelled = match op.op {
            ast::CompareOpKind::NotIn => rest.starts_with("not"),
            _ => rest.starts_with(name),
        };
        let after = rest.get(len..).unwrap_or("");
        if !spelled || len == 0 || !after.chars().all(|ch| ch == '(' || ch.is_whitespace()) {
            return None;
        }
        Some((left_end + closing as u32, len as u32, name))
    }

    /// `source[start..end]` with the edits made inside it so far.
    fn rewritten(&self, start: u32, end: u32) -> Option<String> {
        let (start, end) = (start as usize, end as usize);
        let inside = self
            .edits
            .iter()
            .filter(|e| e.start >= start && e.end <= end);
        applied(self.source, start, end, inside)
    }
}

/// Where the operand written up to `end` starts: `start` (where its expression starts) moved back
/// over the opening parentheses whose closing ones lie inside it, since the span of a primary
/// leaves out the parentheses around it (`(x)|f` starts at `x`).
fn written_start(source: &str, start: u32, end: u32) -> u32 {
    let Some(text) = source.get(start as usize..end as usize) else {
        return start;
    };
    let (mut depth, mut lowest, mut quote) = (0i32, 0i32, None);
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        match (quote, ch) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), _) if ch == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(ch),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => {
                depth -= 1;
                lowest = lowest.min(depth);
            }
            _ => {}
        }
    }
    let mut open = -lowest;
    let mut at = start as usize;
    let before = source.as_bytes();
    while open > 0 && at > 0 {
        at -= 1;
        match before[at] {
            b'(' => open -= 1,
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => return start,
        }
    }
    if open == 0 {
        at as u32
    } else {
        start
    }
}

/// The methods whose call changes what they are called on, or the loop's state, so that a call
/// written twice differs from one.
const EFFECTFUL_METHODS: [&str; 13] = [
    "append",
    "extend",
    "insert",
    "remove",
    "pop",
    "popitem",
    "clear",
    "update",
    "setdefault",
    "sort",
    "reverse",
    "changed",
    "cycle",
];

/// Whether evaluating `e` has no effect beyond its value (no macro call, no method that changes
/// its receiver), so that writing it twice changes nothing.
fn pure(e: &ast::Expr) -> bool {
    let args = |args: &[ast::CallArg]| {
        args.iter().all(|a| match a {
            ast::CallArg::Pos(e) | ast::CallArg::Kwarg(_, e) => pure(e),
            _ => false,
        })
    };
    match e {
        ast::Expr::Const(_) | ast::Expr::Var(_) => true,
        ast::Expr::GetAttr(a) => pure(&a.expr),
        ast::Expr::GetItem(i) => pure(&i.expr) && pure(&i.subscript_expr),
        ast::Expr::Slice(s) => {
            pure(&s.expr) && [&s.start, &s.stop, &s.step].into_iter().flatten().all(pure)
        }
        ast::Expr::UnaryOp(u) => pure(&u.expr),
        ast::Expr::BinOp(b) => pure(&b.left) && pure(&b.right),
        ast::Expr::Filter(f) => f.expr.as_ref().is_none_or(pure) && args(&f.args),
        ast::Expr::Test(t) => pure(&t.expr) && args(&t.args),
        ast::Expr::List(l) => l.items.iter().all(pure),
        ast::Expr::Tuple(t) => t.items.iter().all(pure),
        ast::Expr::Map(m) => m.keys.iter().chain(&m.values).all(pure),
        // A method of a value that leaves it as it is (`s.split(',')`), or `range(...)`.
        ast::Expr::Call(c) => {
            let callee = match &c.expr {
                ast::Expr::GetAttr(a) => !EFFECTFUL_METHODS.contains(&a.name) && pure(&a.expr),
                ast::Expr::Var(v) => v.id == "range",
                _ => false,
            };
            callee && args(&c.args)
        }
        _ => false,
    }
}
