//! The rewrites of calls and macros: arguments bound as Python binds them (splats, keyword
//! arguments, defaults, `caller`), a call of something that is not callable refused with
//! Python's words, `loop.cycle`, and the unpacking of a `set` into several names.

use minijinja::machinery::ast;

use super::{is_loop, Walker};
use crate::render::python_macros::{self, Signature};
use crate::render::python_semantics::{CYCLE_FUNCTION, ITERABLE_FILTER};
use crate::render::python_undefined;
use crate::render::python_unpack;

/// The names minijinja calls by name, which the diagnostic render leaves so.
const SPECIAL_CALLEES: [&str; 5] = ["loop", "caller", "super", "self", "not"];

impl Walker<'_> {
    pub(super) fn call(&mut self, c: &ast::Spanned<ast::Call>, call_block: bool) {
        // `x.items()` calls the method either way: only the receiver is walked (`loop` of
        // `loop.cycle(...)` is not, it becomes an argument of the call that replaces it).
        match &c.expr {
            ast::Expr::GetAttr(a) if a.name == "cycle" && is_loop(&a.expr) => {}
            ast::Expr::GetAttr(a) => self.expr(&a.expr),
            // A called name stays a name (`{% call wrap() %}` needs one), but in the diagnostic
            // render, where one that nothing defines gives jinja2's undefined value (inside a
            // macro, minijinja calls the undefined value it captured, which has no name).
            ast::Expr::Var(v)
                if self.diagnostic
                    && !call_block
                    && !self.macros.contains_key(v.id)
                    && !SPECIAL_CALLEES.contains(&v.id)
                    && !v.id.starts_with("__sft") =>
            {
                // A function, not a filter in parentheses: the call may be a test's argument
                // without parentheses (`x is t f(y)`), which starts with a name.
                let function = python_undefined::CALLEE_FUNCTION;
                self.replace_last(v.span(), format!("{function}({0}, '{0}')", v.id));
            }
            ast::Expr::Var(_) => {}
            other => self.expr(other),
        }
        self.args(&c.args);
        // A recursive loop's `loop(items)` iterates its argument as Python does (`None` raises).
        if let (ast::Expr::Var(v), [ast::CallArg::Pos(items)]) = (&c.expr, c.args.as_slice()) {
            if v.id == "loop" {
                self.wrap(items, format!("|{ITERABLE_FILTER}"));
                if let Some(Some(keep)) = self.loops.last() {
                    let keep = keep.clone();
                    self.wrap(items, keep);
                }
            }
        }
        self.pass_arguments(c);
        self.refuse_call(c, call_block);
        self.pack_call(c);
    }

    /// A call goes through `python_macros::CALL_FUNCTION`, which binds its arguments as jinja2
    /// does (`f(1, 2)` becomes `__sft_py_call(f, 1, 2)`), where minijinja's binding would
    /// differ: a call of a macro whose body names `varargs` or `kwargs`, a call of one of the
    /// template's macros with a splat (whose arguments are not known ahead), and a call of
    /// `caller`. `loop.cycle(...)` goes through `python_semantics::CYCLE_FUNCTION`.
    pub(super) fn pack_call(&mut self, c: &ast::Spanned<ast::Call>) {
        let (function, receiver) = match &c.expr {
            ast::Expr::Var(callee) => {
                let splat = c
                    .args
                    .iter()
                    .any(|a| !matches!(a, ast::CallArg::Pos(_) | ast::CallArg::Kwarg(..)));
                let routed = match self.macros.get(callee.id) {
                    Some(sig) => sig.packs() || splat,
                    None => callee.id == "caller",
                };
                if !routed {
                    return;
                }
                // The diagnostic render's `caller` where no call block gave one names itself
                // as jinja2's does (`No caller defined`).
                let receiver = if callee.id == "caller" && self.diagnostic {
                    format!("caller|{}", python_undefined::CALLER_FILTER)
                } else {
                    callee.id.to_string()
                };
                (python_macros::CALL_FUNCTION, receiver)
            }
            ast::Expr::GetAttr(a) if a.name == "cycle" && is_loop(&a.expr) => {
                (CYCLE_FUNCTION, "loop".to_string())
            }
            _ => return,
        };
        let name_end = c.expr.span().end_offset as usize;
        let Some(open) = self
            .source
            .get(name_end..)
            .and_then(|rest| rest.find('('))
            .map(|at| name_end + at)
        else {
            return;
        };
        let separator = if c.args.is_empty() { "" } else { ", " };
        self.replace(
            self.start(&c.expr),
            open as u32 + 1,
            format!("{function}({receiver}{separator}"),
        );
    }

    /// A call block whose body names `varargs` or `kwargs` gains them as parameters of its
    /// macro, as [`Walker::pack_params`] for a macro (its `caller(...)` calls go through
    /// `python_macros::CALL_FUNCTION`).
    pub(super) fn pack_caller_params(&mut self, c: &ast::Spanned<ast::CallBlock>) {
        let Some(sig) = Signature::of_call_block(self.source, c).filter(|sig| sig.packs()) else {
            return;
        };
        let params = sig.packed_params().join(", ");
        if !c.macro_decl.args.is_empty() {
            if let Some(close) = python_macros::params_close(self.source, &c.macro_decl) {
                self.insert(close as u32, format!(", {params}"));
            }
            return;
        }
        // No parameters: inside `call()`'s parentheses, or in new ones after `call`.
        let start = c.span().start_offset as usize;
        let Some(keyword) = self.source[start..].find("call").map(|at| start + at + 4) else {
            return;
        };
        let rest = &self.source[keyword..];
        let gap = rest.len() - rest.trim_start().len();
        if rest.trim_start().starts_with('(') {
            self.insert((keyword + gap + 1) as u32, params);
        } else {
            self.insert(keyword as u32, format!("({params})"));
        }
    }

    /// The value of `{% set a, b = value %}` passes through `python_unpack::UNPACK_FILTER`
    /// (a tuple written without parentheses, `1, 2`, whole).
    pub(super) fn unpack(&mut self, value: &ast::Expr, names: usize) {
        let suffix = format!("|{}({names})", python_unpack::UNPACK_FILTER);
        match value {
            ast::Expr::Tuple(t) if !t.items.is_empty() => {
                let end = t.items.iter().map(|i| i.span().end_offset).max();
                self.insert(self.start(&t.items[0]), "(".to_string());
                self.insert(end.unwrap_or(value.span().end_offset), format!("){suffix}"));
            }
            _ => self.wrap(value, suffix),
        }
    }

    /// The definition of a macro whose body names `varargs` or `kwargs` gains them as
    /// parameters, filled by `python_macros::CALL_FUNCTION` and empty where a call does not go
    /// through it (a call block's `caller`).
    pub(super) fn pack_params(&mut self, m: &ast::Spanned<ast::Macro>) {
        let Some(sig) = self.macros.get(m.name).filter(|sig| sig.packs()) else {
            return;
        };
        let Some(close) = python_macros::params_close(self.source, m) else {
            return;
        };
        let before = self.source[..close].trim_end();
        let separator = if before.ends_with('(') || before.ends_with(',') {
            ""
        } else {
            ", "
        };
        let params = sig.packed_params().join(", ");
        self.insert(close as u32, format!("{separator}{params}"));
    }

    /// A call of one of the template's macros that jinja2 refuses (a keyword argument the
    /// macro does not take, too many arguments, a call block on a macro that never calls
    /// `caller`) gets a last keyword argument that raises jinja2's `TypeError`, after the
    /// others are evaluated.
    pub(super) fn refuse_call(&mut self, c: &ast::Spanned<ast::Call>, call_block: bool) {
        let ast::Expr::Var(callee) = &c.expr else {
            return;
        };
        let Some(sig) = self.macros.get(callee.id) else {
            return;
        };
        let mut positional = 0;
        let mut keywords = Vec::new();
        for arg in &c.args {
            match arg {
                ast::CallArg::Pos(_) => positional += 1,
                ast::CallArg::Kwarg(name, _) => keywords.push(*name),
                // What a splat passes is not known ahead.
                _ => return,
            }
        }
        let Some(message) = sig.call_error(callee.id, positional, &keywords, call_block) else {
            return;
        };
        let end = c.span().end_offset as usize;
        let Some(inside) = self.source.get(..end).and_then(|t| t.strip_suffix(')')) else {
            return;
        };
        let trimmed = inside.trim_end();
        let separator = if trimmed.ends_with('(') || trimmed.ends_with(',') {
            ""
        } else {
            ", "
        };
        let quoted = message.replace('\\', "\\\\").replace('\'', "\\'");
        self.insert(
            (end - 1) as u32,
            format!(
                "{separator}{}={}('{quoted}')",
                python_macros::REFUSED_CALL_ARGUMENT,
                python_macros::REFUSE_FUNCTION
            ),
        );
    }

    /// At a call of one of the template's macros with defaults, every argument bound to a
    /// parameter with a default passes through `python_macros::PASSED_FILTER`.
    pub(super) fn pass_arguments(&mut self, c: &ast::Call) {
        let ast::Expr::Var(callee) = &c.expr else {
            return;
        };
        let Some(sig) = self.macros.get(callee.id).cloned() else {
            return;
        };
        let mut position = 0;
        for arg in &c.args {
            let (value, binds) = match arg {
                ast::CallArg::Pos(e) => {
                    position += 1;
                    (e, sig.binds_default(Some(position - 1), None))
                }
                ast::CallArg::Kwarg(name, e) => (e, sig.binds_default(None, Some(name))),
                _ => continue,
            };
            if binds {
                self.wrap(value, format!("|{}", python_macros::PASSED_FILTER));
            }
        }
    }

    /// The body of a macro whose calls pass arguments through `PASSED_FILTER` starts by
    /// turning each passed undefined value back into one, in a `set` tag with the whitespace
    /// control of the macro's opening tag.
    pub(super) fn unpass_arguments(&mut self, m: &ast::Spanned<ast::Macro>) {
        if !self.macros.contains_key(m.name) {
            return;
        }
        let Some((at, mark)) = python_macros::opening_tag_end(self.source, m) else {
            return;
        };
        let sig = &self.macros[m.name];
        let mut sets: String = sig
            .defaulted()
            .iter()
            .map(|p| {
                format!(
                    "{{% set {p} = {p}|{} {mark}%}}",
                    python_macros::UNPASS_FILTER
                )
            })
            .collect();
        // The diagnostic render names a parameter no argument was given for, as jinja2 does.
        if self.diagnostic {
            for p in &sig.params[..sig.first_default] {
                let filter = python_undefined::PARAM_FILTER;
                sets.push_str(&format!("{{% set {p} = {p}|{filter}('{p}') {mark}%}}"));
            }
        }
        if !sets.is_empty() {
            self.insert(at as u32, sets);
        }
    }

    pub(super) fn args(&mut self, args: &[ast::CallArg]) {
        for arg in args {
            match arg {
                ast::CallArg::Pos(e)
                | ast::CallArg::Kwarg(_, e)
                | ast::CallArg::PosSplat(e)
                | ast::CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }
}
