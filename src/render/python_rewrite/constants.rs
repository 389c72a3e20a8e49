//! jinja2's constant folding: an expression without variables or calls is computed as the
//! template compiles (its optimizer), which shows where a constant is printed as text, where a
//! failed lookup gives an undefined value, and where a non-finite float is written into the
//! Python code jinja2 generates.

use minijinja::machinery::ast;

/// Whether jinja2 computes `e` when it compiles the template (its constant folding): no
/// variable, no call, no filter that needs the render's context.
pub(super) fn constant(e: &ast::Expr) -> bool {
    let args = |args: &[ast::CallArg]| {
        args.iter().all(|a| match a {
            ast::CallArg::Pos(e) | ast::CallArg::Kwarg(_, e) => constant(e),
            _ => false,
        })
    };
    match e {
        ast::Expr::Const(_) => true,
        ast::Expr::Var(_) | ast::Expr::Call(_) => false,
        ast::Expr::GetAttr(a) => constant(&a.expr),
        ast::Expr::GetItem(i) => constant(&i.expr) && constant(&i.subscript_expr),
        ast::Expr::Slice(s) => {
            constant(&s.expr)
                && [&s.start, &s.stop, &s.step]
                    .into_iter()
                    .flatten()
                    .all(constant)
        }
        ast::Expr::UnaryOp(u) => constant(&u.expr),
        ast::Expr::BinOp(b) => constant(&b.left) && constant(&b.right),
        ast::Expr::Compare(c) => constant(&c.expr) && c.ops.iter().all(|op| constant(&op.expr)),
        // Without `else`, jinja2 folds only a true condition.
        ast::Expr::IfExpr(i) => {
            constant(&i.test_expr)
                && constant(&i.true_expr)
                && i.false_expr.as_ref().is_some_and(constant)
        }
        ast::Expr::Filter(f) => {
            !CONTEXT_FILTERS.contains(&f.name)
                && f.expr.as_ref().is_some_and(constant)
                && args(&f.args)
        }
        ast::Expr::Test(t) => constant(&t.expr) && args(&t.args),
        ast::Expr::List(l) => l.items.iter().all(constant),
        ast::Expr::Tuple(t) => t.items.iter().all(constant),
        ast::Expr::Map(m) => m.keys.iter().chain(&m.values).all(constant),
    }
}

/// Whether a constant `e` computes a float with a filter (`'nan'|float`), where a non-finite one
/// can come from; a comparison or a test gives a bool. (A non-finite literal or product, which
/// jinja2 folds the same way, is left as it is: render plans print it.)
pub(super) fn computes(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Filter(f) => {
            FLOAT_FILTERS.contains(&f.name)
                || f.expr.as_ref().is_some_and(computes)
                || f.args.iter().any(|a| match a {
                    ast::CallArg::Pos(e) | ast::CallArg::Kwarg(_, e) => computes(e),
                    _ => false,
                })
        }
        ast::Expr::Const(_) | ast::Expr::Var(_) | ast::Expr::Call(_) => false,
        ast::Expr::Compare(_) | ast::Expr::Test(_) => false,
        ast::Expr::GetAttr(a) => computes(&a.expr),
        ast::Expr::GetItem(i) => computes(&i.expr) || computes(&i.subscript_expr),
        ast::Expr::Slice(s) => computes(&s.expr),
        ast::Expr::UnaryOp(u) => computes(&u.expr),
        ast::Expr::BinOp(b) => computes(&b.left) || computes(&b.right),
        ast::Expr::IfExpr(i) => {
            computes(&i.true_expr) || i.false_expr.as_ref().is_some_and(computes)
        }
        ast::Expr::List(l) => l.items.iter().any(computes),
        ast::Expr::Tuple(t) => t.items.iter().any(computes),
        ast::Expr::Map(m) => m.keys.iter().chain(&m.values).any(computes),
    }
}

/// The filters that give a float.
const FLOAT_FILTERS: [&str; 4] = ["float", "round", "sum", "abs"];

/// jinja2's filters that take the render's context, which its constant folding leaves to the
/// render.
const CONTEXT_FILTERS: [&str; 6] = [
    "map",
    "select",
    "reject",
    "selectattr",
    "rejectattr",
    "random",
];

#[cfg(test)]
mod tests {
    use crate::render::{ChatTemplate, RenderOptions};

    fn render(source: &str) -> Result<String, String> {
        ChatTemplate::compile(source, vec![("y".into(), "a".into())])
            .and_then(|t| t.render_interpreted(&[], &RenderOptions::default()))
            .map_err(|e| e.message)
    }

    // As jinja2 3.1.6 renders them.
    #[test]
    fn a_folded_non_finite_float_is_a_name_python_does_not_know() {
        for (source, name) in [
            ("{% set x = 'nan'|float %}{{ x }}", "nan"),
            ("{{ y ~ ('-inf'|float) }}", "inf"),
            ("{{ y ~ [('nan'|float), 1] }}", "nan"),
        ] {
            let err = render(source).expect_err(source);
            let want = format!("name '{name}' is not defined");
            assert!(err.contains(&want), "{source}: {err}");
        }
        for (source, text) in [
            ("{{ 'inf'|float }}", "inf"),
            ("{{ ('nan'|float) ~ 'x' }}", "nanx"),
            ("{% if false %}{{ y + 'nan'|float }}{% endif %}ok", "ok"),
            ("{{ y ~ ('1.5'|float) }}", "a1.5"),
        ] {
            assert_eq!(render(source).as_deref(), Ok(text), "{source}");
        }
    }
}
