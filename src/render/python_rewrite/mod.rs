//! The source rewrites that give the interpreter Python's semantics (see `python_semantics`):
//! made from minijinja's own syntax tree, each an edit of the template's text that routes a
//! loop, lookup, operator, join, call or set block through the filter that behaves as Python.

use minijinja::machinery::ast;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::ValueKind;

mod calls;
mod chains;
mod constants;
mod filter_blocks;
mod namespaces;
mod scopes;
mod slices;

use super::python_for_else;
use super::python_loop_filter;
use super::python_macros::{self, Signature};
use super::python_namespace;
use super::python_ops;
use super::python_semantics;
use super::python_semantics::{
    COMPARE_FILTER, DICT_METHODS, GETATTR_FILTER, GETITEM_FILTER, HASHABLE_FILTER, ITERABLE_FILTER,
    MACRO_FIELDS, STR_FILTER,
};
use super::python_undefined;
use super::python_unpack;

pub use namespaces::namespace_assignments;

/// What rewriting a template gave.
pub enum Rewrite {
    /// The rewritten source.
    Done(String),
    /// Nothing to rewrite, or a source that does not parse.
    Nothing,
    /// Edits that do not make a template (a construct they did not foresee): the template is
    /// interpreted by minijinja's rules alone.
    Failed,
}

/// `source` with every loop iterable checked and every dict-method attribute looked up as
/// Python does (and the rest of `python_semantics`), or why there is none (see [`Rewrite`]).
pub fn rewrite(source: &str, syntax: SyntaxConfig) -> Rewrite {
    rewrite_as(source, syntax, false)
}

/// [`rewrite`], with every variable, attribute and item lookup and every inline `if` without
/// `else` giving jinja2's named undefined values: the source of the diagnostic render (see
/// `python_undefined`).
pub fn rewrite_diagnostic(source: &str, syntax: SyntaxConfig) -> Option<String> {
    match rewrite_as(source, syntax, true) {
        Rewrite::Done(text) => Some(text),
        // The diagnostic environment's methods still name what they do not find.
        Rewrite::Nothing => Some(source.to_string()),
        Rewrite::Failed => None,
    }
}

fn rewrite_as(source: &str, syntax: SyntaxConfig, diagnostic: bool) -> Rewrite {
    match rewrite_with(source, syntax.clone(), diagnostic, true) {
        // A chained comparison the edits did not foresee leaves its chain to minijinja, not
        // the whole template.
        Rewrite::Failed => rewrite_with(source, syntax, diagnostic, false),
        done => done,
    }
}

fn rewrite_with(source: &str, syntax: SyntaxConfig, diagnostic: bool, chains: bool) -> Rewrite {
    let Ok(tree) = minijinja::machinery::parse(source, "chat_template", syntax.clone()) else {
        return Rewrite::Nothing;
    };
    let mut walker = Walker {
        source,
        edits: Vec::new(),
        macros: python_macros::signatures(source, &tree),
        diagnostic,
        chains,
        unfit: false,
        withs: 0,
        loops: Vec::new(),
        block_places: filter_blocks::places(&tree),
        folded_slice: None,
        in_constant: false,
    };
    walker.stmt(&tree);
    if walker.unfit {
        return Rewrite::Failed;
    }
    let edits = walker.edits;
    if edits.is_empty() {
        return Rewrite::Nothing;
    }
    let Some(out) = applied(source, 0, source.len(), edits.iter()) else {
        return Rewrite::Failed;
    };
    // A rewrite that does not parse (a construct the edits did not foresee) is not used.
    match minijinja::machinery::parse(&out, "chat_template", syntax) {
        Ok(_) => Rewrite::Done(out),
        Err(_) => Rewrite::Failed,
    }
}

/// `source[start..end]` with `edits` (all inside it) made: edits at the same offset in their
/// order of discovery; `None` where two overlap (a replaced range, an attribute's `.name`,
/// never holds another edit) or an offset is not a character boundary.
fn applied<'e>(
    source: &str,
    start: usize,
    end: usize,
    edits: impl Iterator<Item = &'e Edit>,
) -> Option<String> {
    let mut edits: Vec<&Edit> = edits.collect();
    edits.sort_by_key(|e| (e.start, e.order));
    let mut out = String::with_capacity(end - start + edits.len() * 24);
    let mut last = start;
    for e in edits {
        if e.start < last {
            return None;
        }
        out.push_str(source.get(last..e.start)?);
        out.push_str(&e.text);
        last = e.end;
    }
    out.push_str(source.get(last..end)?);
    Some(out)
}

/// `source[start..end]` becomes `text` (an insertion where `start == end`).
struct Edit {
    start: usize,
    end: usize,
    order: usize,
    text: String,
}

/// Where the text of `e` starts in `source`. The span of an expression with a left operand
/// starts at its operator (`x.a`, `x|f`) or, for inline `if`s and single comparisons, at the
/// token before the expression (minijinja's parser): the leftmost operand decides. A unary
/// operator's span starts at the operator where it is one written (`not x`, `-x`); `x not in y`
/// and `x is not t` are `not` around the comparison or the test, spanned from elsewhere.
fn expr_start(source: &str, e: &ast::Expr) -> u32 {
    let start = |e| expr_start(source, e);
    match e {
        ast::Expr::GetAttr(a) => start(&a.expr),
        ast::Expr::GetItem(i) => start(&i.expr),
        ast::Expr::Slice(s) => start(&s.expr),
        ast::Expr::Call(c) => start(&c.expr),
        ast::Expr::Filter(f) => f.expr.as_ref().map_or(e.span().start_offset, start),
        ast::Expr::Test(t) => start(&t.expr),
        ast::Expr::BinOp(b) => start(&b.left),
        ast::Expr::Compare(c) => start(&c.expr),
        ast::Expr::IfExpr(i) => start(&i.true_expr),
        ast::Expr::UnaryOp(u) => {
            let own = e.span().start_offset;
            let written = match u.op {
                ast::UnaryOpKind::Not => source.get(own as usize..).is_some_and(|t| {
                    t.starts_with("not")
                        && !t[3..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                }),
                ast::UnaryOpKind::Neg => source
                    .get(own as usize..)
                    .is_some_and(|t| t.starts_with('-')),
            };
            let inner = start(&u.expr);
            if written {
                own.min(inner)
            } else {
                inner
            }
        }
        _ => e.span().start_offset,
    }
}

/// Whether `e` is the name `loop`.
fn is_loop(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Var(v) if v.id == "loop")
}

struct Walker<'s> {
    source: &'s str,
    edits: Vec<Edit>,
    /// The template's macros with defaults (see `python_macros`).
    macros: std::collections::HashMap<&'s str, Signature<'s>>,
    /// Whether lookups give named undefined values (`rewrite_diagnostic`).
    diagnostic: bool,
    /// Whether chained comparisons are rewritten (see `chains`).
    chains: bool,
    /// A construct whose Python semantics the edits cannot give: the rewrite fails.
    unfit: bool,
    /// How many `with` blocks became `set` tags (see `scopes`), naming each one's saved values.
    withs: usize,
    /// The loops (and macro bodies, where `loop` is not theirs) around the walk, innermost
    /// last: for a recursive loop with a filter, the `loop(...)` suffix that filters its
    /// inner levels too (see `python_loop_filter`).
    loops: Vec<Option<String>>,
    /// Each filter block's place in its output, by where its filter ends (see `filter_blocks`).
    block_places: std::collections::HashMap<u32, String>,
    /// Where the slice starts that jinja2 computes as it compiles (see `slices`).
    folded_slice: Option<u32>,
    /// Whether the walk is inside a constant that jinja2 computes as it compiles.
    in_constant: bool,
}

impl Walker<'_> {
    fn start(&self, e: &ast::Expr) -> u32 {
        expr_start(self.source, e)
    }

    fn replace(&mut self, start: u32, end: u32, text: String) {
        let order = self.edits.len();
        self.edits.push(Edit {
            start: start as usize,
            end: end as usize,
            order,
            text,
        });
    }

    /// Removes the one-character operator at `at`, after every insertion there (the ones of
    /// enclosing expressions, which open before the operator).
    fn remove_operator(&mut self, at: u32) {
        self.edits.push(Edit {
            start: at as usize,
            end: at as usize + 1,
            order: usize::MAX,
            text: String::new(),
        });
    }

    /// Replaces the text of `span` (a name), after every insertion at its start (the ones of
    /// enclosing expressions, which open before it).
    fn replace_last(&mut self, span: minijinja::machinery::Span, text: String) {
        self.edits.push(Edit {
            start: span.start_offset as usize,
            end: span.end_offset as usize,
            order: usize::MAX,
            text,
        });
    }

    fn insert(&mut self, at: u32, text: String) {
        self.replace(at, at, text);
    }

    /// Wraps `e` as `(e)` followed by `suffix`.
    fn wrap(&mut self, e: &ast::Expr, suffix: String) {
        self.insert(self.start(e), "(".to_string());
        self.insert(e.span().end_offset, format!("){suffix}"));
    }

    /// jinja2 reads `not` as an operator only where a whole condition starts (`not x`,
    /// `a and not b`); as an operand of an arithmetic operator, of `~`, of a comparison or of
    /// unary minus, `not (x)` is a call of a variable named `not`, which is undefined. Such a
    /// `not` becomes a call of [`python_undefined::NOT_CALL_FUNCTION`], which raises that
    /// `UndefinedError` once its argument is evaluated. Made after the operand's other edits,
    /// so that their insertions before it come first.
    fn not_as_name(&mut self, operand: &ast::Expr) {
        // The primary a chain of filters, lookups and calls starts from (`not (x)|f`).
        let mut operand = operand;
        loop {
            operand = match operand {
                ast::Expr::Filter(f) => match &f.expr {
                    Some(e) => e,
                    None => return,
                },
                ast::Expr::GetAttr(a) => &a.expr,
                ast::Expr::GetItem(g) => &g.expr,
                ast::Expr::Test(t) => &t.expr,
                ast::Expr::Call(c) if !matches!(&c.expr, ast::Expr::Var(v) if v.id == "not") => {
                    &c.expr
                }
                _ => break,
            };
        }
        // minijinja reads `not (x)` there as a call of `not` or as the operator.
        let own = match operand {
            ast::Expr::Call(c) if matches!(&c.expr, ast::Expr::Var(v) if v.id == "not") => {
                c.expr.span().start_offset
            }
            ast::Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOpKind::Not) => self.start(operand),
            _ => return,
        };
        let Some(text) = self.source.get(own as usize..) else {
            return;
        };
        let called = text.strip_prefix("not").is_some_and(|rest| {
            rest.starts_with(|c: char| c.is_whitespace() || c == '(')
                && rest.trim_start().starts_with('(')
        });
        if called {
            let name = python_undefined::NOT_CALL_FUNCTION.to_string();
            self.replace(own, own + 3, name);
        }
    }

    fn stmts(&mut self, stmts: &[ast::Stmt]) {
        for stmt in stmts {
            if let ast::Stmt::FilterBlock(f) = stmt {
                let end = f.filter_span.end_offset;
                let place = self.block_places.get(&end).map_or("none", String::as_str);
                let text = format!("|{}({place})", python_semantics::BLOCK_TEXT_FILTER);
                self.insert(end, text);
            }
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &ast::Stmt) {
        match stmt {
            ast::Stmt::Template(t) => self.stmts(&t.children),
            ast::Stmt::EmitExpr(e) => {
                // A constant printed by itself is text in the code jinja2 generates, and a
                // constant slice is computed as jinja2 folds it.
                let constant = constants::constant(&e.expr);
                if let ast::Expr::Slice(s) = &e.expr {
                    if constant {
                        self.folded_slice = Some(s.span().start_offset);
                    }
                }
                self.in_constant = constant;
                self.expr(&e.expr);
                self.in_constant = false;
            }
            ast::Stmt::ForLoop(f) => {
                match python_for_else::edits(self.source, f) {
                    Some(edits) => {
                        for (start, end, text) in edits {
                            self.replace(start as u32, end as u32, text);
                        }
                    }
                    None => self.unfit = true,
                }
                self.expr(&f.iter);
                // Python's unpacking of each item into several names (`python_unpack`); a
                // recursive loop's inner calls would bypass it, so minijinja's stays there.
                let unpack = match &f.target {
                    ast::Expr::List(names) if !f.recursive => format!(
                        "|{}({})",
                        python_unpack::UNPACK_EACH_FILTER,
                        names.items.len()
                    ),
                    _ => String::new(),
                };
                self.wrap(&f.iter, format!("|{ITERABLE_FILTER}{unpack}"));
                if let Some(filter) = &f.filter_expr {
                    self.expr(filter);
                }
                let keep = f
                    .filter_expr
                    .as_ref()
                    .filter(|_| f.recursive)
                    .and_then(|filter| self.keep_suffix(&f.target, filter));
                self.loops.push(keep);
                self.stmts(&f.body);
                self.loops.pop();
                self.stmts(&f.else_body);
            }
            ast::Stmt::IfCond(c) => {
                self.expr(&c.expr);
                self.stmts(&c.true_body);
                self.stmts(&c.false_body);
            }
            ast::Stmt::WithBlock(w) => {
                for (_, value) in &w.assignments {
                    self.expr(value);
                }
                self.with_without_frame(w);
                self.with_values_first(w);
                self.stmts(&w.body);
            }
            ast::Stmt::Set(s) => match &s.target {
                ast::Expr::GetAttr(a) => {
                    // The namespace check and store wrap the value's own edits.
                    let store = self.namespace_store(a);
                    let (start, end) = namespaces::value_range(self.source, &s.expr);
                    if store.is_some() {
                        self.insert(start, "(".to_string());
                    }
                    self.expr(&s.expr);
                    if let Some(store) = store {
                        self.insert(end, format!("){store}"));
                    }
                }
                target => {
                    self.expr(&s.expr);
                    if let ast::Expr::List(names) = target {
                        self.unpack(&s.expr, names.items.len());
                    }
                }
            },
            ast::Stmt::SetBlock(s) => {
                if let ast::Expr::GetAttr(a) = &s.target {
                    if let Some(store) = self.namespace_store(a) {
                        let at = match &s.filter {
                            Some(filter) => filter.span().end_offset,
                            None => s.target.span().end_offset,
                        };
                        self.insert(at, format!(" {store}"));
                    }
                }
                self.set_block_scope(s);
                self.stmts(&s.body);
            }
            ast::Stmt::AutoEscape(a) => self.stmts(&a.body),
            // jinja2 runs a filter block's body in a scope of its own, as a set block's.
            ast::Stmt::FilterBlock(f) => {
                let end = f.span().end_offset;
                self.scope_of_its_own(&f.body, f.filter_span.end_offset, end, "endfilter");
                self.stmts(&f.body);
            }
            ast::Stmt::Block(b) => self.stmts(&b.body),
            ast::Stmt::Macro(m) => {
                m.defaults.iter().for_each(|d| self.expr(d));
                self.pack_params(m);
                self.unpass_arguments(m);
                self.loops.push(None);
                self.stmts(&m.body);
                self.loops.pop();
            }
            ast::Stmt::CallBlock(c) => {
                self.call(&c.call, true);
                self.pack_caller_params(c);
                self.loops.push(None);
                self.stmts(&c.macro_decl.body);
                self.loops.pop();
            }
            ast::Stmt::Do(d) => self.call(&d.call, false),
            _ => {}
        }
    }

    /// A namespace assignment's target `a` (`ns.name`) made the name
    /// `python_namespace::DISCARDED`, and the filter suffix that stores the assigned value in
    /// the namespace (see `namespaces`). `None`, with the rewrite unfit, where the target's text
    /// is not at hand.
    fn namespace_store(&mut self, a: &ast::Spanned<ast::GetAttr>) -> Option<String> {
        let Some((start, end, suffix)) = namespaces::store(self.source, a) else {
            self.unfit = true;
            return None;
        };
        self.replace(start, end, python_namespace::DISCARDED.to_string());
        Some(suffix)
    }

    /// The suffix that passes a `loop(...)` argument of a recursive loop with `target` and
    /// `filter` through `python_loop_filter::KEEP_FILTER`: the filter's text with its own
    /// edits (made before the loop's body is walked). `None` where the target nests.
    fn keep_suffix(&self, target: &ast::Expr, filter: &ast::Expr) -> Option<String> {
        let names = self
            .source
            .get(self.start(target) as usize..target.span().end_offset as usize)
            .and_then(python_loop_filter::target_names)?;
        let (start, end) = (
            self.start(filter) as usize,
            filter.span().end_offset as usize,
        );
        let inside = self
            .edits
            .iter()
            .filter(|e| e.start >= start && e.end <= end);
        let condition = applied(self.source, start, end, inside)?;
        Some(format!(
            "|{}({}, {})",
            python_loop_filter::KEEP_FILTER,
            python_loop_filter::quoted(&names),
            python_loop_filter::quoted(&condition)
        ))
    }

    /// `a < b` becomes `((a)|compare('<', b))`, and likewise `<=`, `>`, `>=`, `in` and
    /// `not in` (`filter` the comparison's, `ops` its operators) and the arithmetic operators
    /// (`filter` the arithmetic one): the operator between the operands (after the closing
    /// parentheses of the left one's groups, before the opening ones of the right one's) is
    /// replaced.
    fn binary(&mut self, b: &ast::BinOp, ops: &[&'static str], filter: &str) {
        let left_end = b.left.span().end_offset;
        let right_start = self.start(&b.right);
        let Some(between) = self.source.get(left_end as usize..right_start as usize) else {
            return;
        };
        let closing = between.len() - between.trim_start_matches([')', ' ', '\t', '\n']).len();
        let rest = &between[closing..];
        let op = ops
            .iter()
            .copied()
            .find(|op| rest.starts_with(op))
            .or_else(|| {
                let after_not = rest.strip_prefix("not").filter(|_| ops.contains(&"in"))?;
                let gap = after_not.len() - after_not.trim_start().len();
                (gap > 0 && after_not[gap..].starts_with("in")).then_some("not in")
            });
        let Some(op) = op else {
            return;
        };
        let op_len = if op == "not in" {
            rest.find("in").map_or(0, |at| at + 2)
        } else {
            op.len()
        };
        let after = &rest[op_len..];
        if !after.chars().all(|c| c == '(' || c.is_whitespace())
            || (op.ends_with("in") && !after.starts_with(|c: char| c == '(' || c.is_whitespace()))
        {
            return;
        }
        let op_start = left_end + closing as u32;
        self.insert(self.start(&b.left), "((".to_string());
        self.replace(
            op_start,
            op_start + op_len as u32,
            format!(")|{filter}('{op}', "),
        );
        self.insert(b.right.span().end_offset, "))".to_string());
    }

    /// Where the `[` of `x[k]` (`e`, with `i` its lookup) is, and where `e` ends (after its
    /// `]`); between the receiver and the bracket may be the closing parentheses of its groups.
    fn brackets(&self, i: &ast::GetItem, e: &ast::Expr) -> Option<(u32, u32)> {
        let receiver = i.expr.span().end_offset;
        let end = e.span().end_offset;
        let open = self
            .source
            .get(receiver as usize..end as usize)
            .filter(|text| text.ends_with(']'))
            .and_then(|text| text.find('['))?;
        Some((receiver + open as u32, end))
    }

    /// The edits of `e`; a constant part of it that jinja2 computes as it compiles the template
    /// and writes into the code it generates is checked for a non-finite float, which Python
    /// then reads as a name (`nan`, `inf`) and raises `NameError` for. A constant printed by
    /// itself is written as text instead, and raises nothing.
    fn expr(&mut self, e: &ast::Expr) {
        if self.in_constant || !constants::constant(e) {
            return self.expr_edits(e);
        }
        self.in_constant = true;
        self.expr_edits(e);
        self.in_constant = false;
        if constants::computes(e) {
            self.insert(self.start(e), "(".to_string());
            self.wrap(e, format!("|{})", python_ops::FOLDED_FILTER));
        }
    }

    fn expr_edits(&mut self, e: &ast::Expr) {
        match e {
            ast::Expr::GetAttr(a) => {
                self.expr(&a.expr);
                let filter = if self.diagnostic {
                    python_undefined::ATTR_FILTER
                } else {
                    GETATTR_FILTER
                };
                if self.diagnostic
                    || DICT_METHODS.contains(&a.name)
                    || MACRO_FIELDS.contains(&a.name)
                {
                    // `x.items` becomes `((x)|getattr('items'))`: the dot and the name are
                    // replaced by the filter call. Between the receiver's span and the dot there
                    // may be the closing parentheses of its groups (`(x).items`), which stay.
                    let receiver = a.expr.span().end_offset;
                    let Some((dot, end)) = self
                        .source
                        .get(receiver as usize..e.span().end_offset as usize)
                        .and_then(|text| {
                            Some((text.find('.')?, text.rfind(a.name)? + a.name.len()))
                        })
                    else {
                        return;
                    };
                    self.insert(self.start(&a.expr), "((".to_string());
                    self.replace(
                        receiver + dot as u32,
                        receiver + end as u32,
                        format!(")|{filter}('{}'))", a.name),
                    );
                }
            }
            ast::Expr::Call(c) => self.call(c, false),
            ast::Expr::UnaryOp(u) => {
                self.expr(&u.expr);
                let number = matches!(&u.expr, ast::Expr::Const(c) if c.value.is_number());
                if matches!(u.op, ast::UnaryOpKind::Neg) && !number {
                    // The operator becomes the filter (minijinja's own `-` stops at 128 bits).
                    let own = e.span().start_offset;
                    if self
                        .source
                        .get(own as usize..)
                        .is_some_and(|t| t.starts_with('-'))
                    {
                        self.remove_operator(own);
                        self.insert(self.start(&u.expr), "(".to_string());
                        self.wrap(&u.expr, format!("|{})", python_ops::NEG_FILTER));
                    } else {
                        self.unfit = true;
                    }
                }
                if matches!(u.op, ast::UnaryOpKind::Neg) {
                    self.not_as_name(&u.expr);
                }
            }
            ast::Expr::BinOp(b) => {
                self.expr(&b.left);
                self.expr(&b.right);
                if matches!(
                    b.op,
                    ast::BinOpKind::Lt
                        | ast::BinOpKind::Lte
                        | ast::BinOpKind::Gt
                        | ast::BinOpKind::Gte
                        | ast::BinOpKind::In
                ) {
                    self.binary(b, &["<=", ">=", "<", ">", "in"], COMPARE_FILTER);
                }
                if matches!(
                    b.op,
                    ast::BinOpKind::Add
                        | ast::BinOpKind::Sub
                        | ast::BinOpKind::Mul
                        | ast::BinOpKind::Div
                        | ast::BinOpKind::FloorDiv
                        | ast::BinOpKind::Rem
                        | ast::BinOpKind::Pow
                ) {
                    self.binary(b, &python_ops::OPERATORS, python_ops::ARITH_FILTER);
                }
                if let ast::BinOpKind::Concat = b.op {
                    // After the operands' own edits, so that their closing text comes first.
                    for operand in [&b.left, &b.right] {
                        // minijinja reads `x ~ not -y` as `(x ~ not) - y`, `not` a variable:
                        // in parentheses it would be the operator.
                        let plain = match operand {
                            ast::Expr::Const(c) => c.value.kind() == ValueKind::String,
                            ast::Expr::Var(v) => v.id == "not",
                            _ => false,
                        };
                        if !plain {
                            self.wrap(operand, format!("|{STR_FILTER}"));
                        }
                    }
                }
                if !matches!(b.op, ast::BinOpKind::ScAnd | ast::BinOpKind::ScOr) {
                    self.not_as_name(&b.right);
                }
            }
            ast::Expr::Compare(c) => {
                self.expr(&c.expr);
                c.ops.iter().for_each(|op| self.expr(&op.expr));
                if self.chains {
                    self.chain(c);
                }
                c.ops.iter().for_each(|op| self.not_as_name(&op.expr));
            }
            ast::Expr::IfExpr(i) => {
                self.expr(&i.test_expr);
                self.expr(&i.true_expr);
                match &i.false_expr {
                    Some(f) => self.expr(f),
                    // Not where another `if` or an `else` follows the test (nested inline
                    // `if`s, spanned otherwise).
                    None if self.diagnostic
                        && !self
                            .source
                            .get(i.test_expr.span().end_offset as usize..)
                            .is_some_and(|t| {
                                let t = t.trim_start();
                                t.starts_with("if") || t.starts_with("else")
                            }) =>
                    {
                        let line = i.true_expr.span().start_line;
                        self.insert(
                            i.test_expr.span().end_offset,
                            format!(" else {}({line})", python_undefined::NO_ELSE_FUNCTION),
                        );
                    }
                    None => {}
                }
            }
            ast::Expr::Filter(f) => {
                if let Some(v) = &f.expr {
                    self.expr(v);
                }
                self.args(&f.args);
            }
            ast::Expr::Test(t) => {
                self.expr(&t.expr);
                self.args(&t.args);
            }
            ast::Expr::GetItem(i) => {
                self.expr(&i.expr);
                self.expr(&i.subscript_expr);
                let name = match &i.subscript_expr {
                    ast::Expr::Const(c) => c.value.as_str(),
                    _ => None,
                };
                let Some((open, end)) = self.brackets(i, e) else {
                    return;
                };
                if self.diagnostic {
                    // `x[k]` becomes `((x)|item(k))`: the brackets are replaced.
                    self.insert(self.start(&i.expr), "((".to_string());
                    let filter = python_undefined::ITEM_FILTER;
                    self.replace(open, open + 1, format!(")|{filter}("));
                    self.replace(end - 1, end, "))".to_string());
                } else if let Some(name) = name.filter(|n| DICT_METHODS.contains(n)) {
                    // `x['items']` becomes `((x)|getitem('items'))`, from the bracket on.
                    self.insert(self.start(&i.expr), "((".to_string());
                    self.replace(open, end, format!(")|{GETITEM_FILTER}('{name}'))"));
                }
            }
            ast::Expr::Slice(s) => self.slice(s),
            ast::Expr::List(l) => l.items.iter().for_each(|x| self.expr(x)),
            ast::Expr::Tuple(t) => t.items.iter().for_each(|x| self.expr(x)),
            ast::Expr::Map(m) => {
                m.keys.iter().for_each(|x| self.expr(x));
                m.values.iter().for_each(|x| self.expr(x));
                // After every key and value is evaluated, as Python builds a dict.
                if m.keys.iter().any(|k| !matches!(k, ast::Expr::Const(_))) {
                    self.insert(self.start(e), "(".to_string());
                    self.wrap(e, format!("|{HASHABLE_FILTER})"));
                }
            }
            ast::Expr::Var(v)
                if self.diagnostic
                    && v.id != "not"
                    && self
                        .source
                        .get(v.span().start_offset as usize..v.span().end_offset as usize)
                        == Some(v.id) =>
            {
                // In parentheses of its own, so that a call or a lookup applies to the result.
                let filter = python_undefined::VAR_FILTER;
                self.insert(self.start(e), "(".to_string());
                self.wrap(e, format!("|{filter}('{}'))", v.id));
            }
            ast::Expr::Var(_) | ast::Expr::Const(_) => {}
        }
    }
}
