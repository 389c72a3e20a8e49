//! From minijinja's syntax tree to a plan's instructions. A template that uses anything the plan
//! does not implement (imports, call blocks, filters it does not know, ...) gets no plan: the
//! interpreter renders it, as before.

use std::collections::HashMap;

use minijinja::machinery::ast;
use minijinja::value::ValueKind;

use super::ir::{
    Arg, AttrName, BinOp, CmpOp, Const, Expr, Filter, ForLoop, Macro, MapFilter, Method, Stmt,
    Target, Test,
};
use super::value::Sym;
use crate::render::python_semantics::DICT_METHODS;

/// The construct the plan does not implement.
pub struct Unsupported(pub &'static str);

type Res<T> = Result<T, Unsupported>;

#[derive(Default)]
pub struct Compiler {
    names: HashMap<String, Sym>,
    pub macros: Vec<Macro>,
    /// How deep in `for`, `with` and macro bodies the statement being compiled is.
    depth: usize,
}

impl Compiler {
    pub fn sym(&mut self, name: &str) -> Sym {
        let next = self.names.len() as Sym;
        *self.names.entry(name.to_string()).or_insert(next)
    }

    /// The interned names, by symbol.
    pub fn names(&self) -> Vec<Box<str>> {
        let mut names = vec![Box::<str>::from(""); self.names.len()];
        for (name, &sym) in &self.names {
            names[sym as usize] = name.as_str().into();
        }
        names
    }

    pub fn template(&mut self, root: &ast::Stmt) -> Res<Vec<Stmt>> {
        match root {
            ast::Stmt::Template(t) => self.stmts(&t.children),
            _ => Err(Unsupported("site 2")),
        }
    }

    fn stmts(&mut self, stmts: &[ast::Stmt]) -> Res<Vec<Stmt>> {
        stmts.iter().map(|s| self.stmt(s)).collect()
    }

    fn nested(&mut self, stmts: &[ast::Stmt]) -> Res<Vec<Stmt>> {
        self.depth += 1;
        let out = self.stmts(stmts);
        self.depth -= 1;
        out
    }

    /// A statement, or [`Stmt::Unsupported`] where the plan does not implement it: only the
    /// renders that reach it go to the interpreter.
    fn stmt(&mut self, stmt: &ast::Stmt) -> Res<Stmt> {
        Ok(self.stmt_or_unsupported(stmt).unwrap_or(Stmt::Unsupported))
    }

    fn stmt_or_unsupported(&mut self, stmt: &ast::Stmt) -> Res<Stmt> {
        Ok(match stmt {
            ast::Stmt::EmitRaw(raw) => Stmt::Raw(raw.raw.into()),
            ast::Stmt::EmitExpr(emit) => {
                let mut parts = Vec::new();
                flatten_add(&emit.expr, &mut parts);
                if parts.len() > 1 {
                    let parts = parts
                        .into_iter()
                        .map(|e| self.expr(e))
                        .collect::<Res<_>>()?;
                    Stmt::EmitJoined(parts)
                } else {
                    Stmt::Emit(self.expr(&emit.expr)?)
                }
            }
            ast::Stmt::ForLoop(f) => {
                if f.recursive {
                    return Err(Unsupported("site 3"));
                }
                Stmt::For(Box::new(ForLoop {
                    target: self.target(&f.target)?,
                    iter: self.expr(&f.iter)?,
                    filter: f.filter_expr.as_ref().map(|e| self.expr(e)).transpose()?,
                    body: self.nested(&f.body)?,
                    else_body: self.nested(&f.else_body)?,
                }))
            }
            ast::Stmt::IfCond(c) => Stmt::If(
                self.expr(&c.expr)?,
                self.stmts(&c.true_body)?,
                self.stmts(&c.false_body)?,
            ),
            ast::Stmt::Set(s) => match &s.target {
                // transformers refuses a namespace field named with a leading `_`: the
                // interpreter raises its error.
                ast::Expr::GetAttr(attr) if attr.name.starts_with('_') => Stmt::Unsupported,
                ast::Expr::GetAttr(attr) => match &attr.expr {
                    ast::Expr::Var(var) => {
                        let object = self.sym(var.id);
                        let name = self.sym(attr.name);
                        Stmt::SetAttr(object, name, self.expr(&s.expr)?)
                    }
                    _ => return Err(Unsupported("site 4")),
                },
                target => Stmt::Set(self.target(target)?, self.expr(&s.expr)?),
            },
            ast::Stmt::SetBlock(s) => {
                if s.filter.is_some() {
                    return Err(Unsupported("site 5"));
                }
                let ast::Expr::Var(var) = &s.target else {
                    return Err(Unsupported("site 6"));
                };
                let sym = self.sym(var.id);
                Stmt::SetBlock(sym, self.nested(&s.body)?)
            }
            ast::Stmt::WithBlock(w) => {
                let mut assigns = Vec::new();
                for (target, value) in &w.assignments {
                    assigns.push((self.target(target)?, self.expr(value)?));
                }
                Stmt::With(assigns, self.nested(&w.body)?)
            }
            ast::Stmt::Macro(m) => {
                // Macros defined inside loops or other macros close over their surroundings;
                // the plan only knows top-level macros, which see the template's globals.
                if self.depth > 0 {
                    return Err(Unsupported("site 7"));
                }
                let index = self.macro_def(m);
                Stmt::DefineMacro(self.sym(m.name), index)
            }
            ast::Stmt::Do(d) => Stmt::Do(self.call(&d.call)?),
            ast::Stmt::Continue(_) => Stmt::Continue,
            ast::Stmt::Break(_) => Stmt::Break,
            _ => return Err(Unsupported("site 8")),
        })
    }

    /// The index of a macro; one the plan does not implement gets a body that hands the render
    /// to the interpreter when called.
    fn macro_def(&mut self, m: &ast::Macro) -> usize {
        let made = self.macro_or_unsupported(m).unwrap_or_else(|_| Macro {
            params: Vec::new(),
            defaults: Vec::new(),
            body: vec![Stmt::Unsupported],
        });
        self.macros.push(made);
        self.macros.len() - 1
    }

    fn macro_or_unsupported(&mut self, m: &ast::Macro) -> Res<Macro> {
        let mut params = Vec::new();
        for arg in &m.args {
            let ast::Expr::Var(var) = arg else {
                return Err(Unsupported("site 9"));
            };
            params.push(self.sym(var.id));
        }
        let mut defaults: Vec<Option<Expr>> = (0..params.len()).map(|_| None).collect();
        let first_default = params.len() - m.defaults.len().min(params.len());
        for (i, default) in m.defaults.iter().enumerate() {
            defaults[first_default + i] = Some(self.expr(default)?);
        }
        let body = self.nested(&m.body)?;
        // `caller`, `varargs` and `kwargs` are special inside a macro body (the check is for the
        // whole template so far, which is stricter than needed).
        for special in ["caller", "varargs", "kwargs"] {
            if self.names.contains_key(special) {
                return Err(Unsupported("site 10"));
            }
        }
        Ok(Macro {
            params,
            defaults,
            body,
        })
    }

    fn target(&mut self, target: &ast::Expr) -> Res<Target> {
        match target {
            ast::Expr::Var(var) => Ok(Target::Name(self.sym(var.id))),
            ast::Expr::Tuple(_) | ast::Expr::List(_) => {
                let items = match target {
                    ast::Expr::Tuple(t) => &t.items,
                    ast::Expr::List(l) => &l.items,
                    _ => return Err(Unsupported("target")),
                };
                let mut names = Vec::new();
                for item in items {
                    let ast::Expr::Var(var) = item else {
                        return Err(Unsupported("site 11"));
                    };
                    names.push(self.sym(var.id));
                }
                Ok(Target::Tuple(names))
            }
            _ => Err(Unsupported("site 12")),
        }
    }

    fn boxed(&mut self, e: &ast::Expr) -> Res<Box<Expr>> {
        Ok(Box::new(self.expr(e)?))
    }

    /// An expression, or [`Expr::Unsupported`] where the plan does not implement it: only the
    /// renders that evaluate it go to the interpreter.
    fn expr(&mut self, e: &ast::Expr) -> Res<Expr> {
        Ok(self.expr_or_unsupported(e).unwrap_or(Expr::Unsupported))
    }

    fn expr_or_unsupported(&mut self, e: &ast::Expr) -> Res<Expr> {
        Ok(match e {
            ast::Expr::Var(var) => Expr::Var(self.sym(var.id)),
            ast::Expr::Const(c) => Expr::Const(constant(&c.value)?),
            ast::Expr::List(l) => Expr::List(self.exprs(&l.items)?),
            ast::Expr::Tuple(t) => Expr::Tuple(self.exprs(&t.items)?),
            ast::Expr::Map(m) => {
                let mut pairs = Vec::new();
                for (k, v) in m.keys.iter().zip(&m.values) {
                    let ast::Expr::Const(key) = k else {
                        return Err(Unsupported("site 13"));
                    };
                    let key = key.value.as_str().ok_or(Unsupported("site 14"))?;
                    if pairs
                        .iter()
                        .any(|(k, _): &(Box<str>, Expr)| k.as_ref() == key)
                    {
                        return Err(Unsupported("site 15"));
                    }
                    pairs.push((key.into(), self.expr(v)?));
                }
                Expr::Map(pairs)
            }
            ast::Expr::UnaryOp(u) => match u.op {
                ast::UnaryOpKind::Not => Expr::Not(self.boxed(&u.expr)?),
                ast::UnaryOpKind::Neg => Expr::Neg(self.boxed(&u.expr)?),
            },
            ast::Expr::BinOp(b) => {
                let (l, r) = (self.boxed(&b.left)?, self.boxed(&b.right)?);
                let cmp = |op, l, r: Box<Expr>| Expr::Compare(l, vec![(op, *r)]);
                match b.op {
                    ast::BinOpKind::ScAnd => Expr::And(l, r),
                    ast::BinOpKind::ScOr => Expr::Or(l, r),
                    ast::BinOpKind::Eq => cmp(CmpOp::Eq, l, r),
                    ast::BinOpKind::Ne => cmp(CmpOp::Ne, l, r),
                    ast::BinOpKind::Lt => cmp(CmpOp::Lt, l, r),
                    ast::BinOpKind::Lte => cmp(CmpOp::Lte, l, r),
                    ast::BinOpKind::Gt => cmp(CmpOp::Gt, l, r),
                    ast::BinOpKind::Gte => cmp(CmpOp::Gte, l, r),
                    ast::BinOpKind::In => cmp(CmpOp::In, l, r),
                    ast::BinOpKind::Add => Expr::Bin(BinOp::Add, l, r),
                    ast::BinOpKind::Sub => Expr::Bin(BinOp::Sub, l, r),
                    ast::BinOpKind::Mul => Expr::Bin(BinOp::Mul, l, r),
                    ast::BinOpKind::Div => Expr::Bin(BinOp::Div, l, r),
                    ast::BinOpKind::FloorDiv => Expr::Bin(BinOp::FloorDiv, l, r),
                    ast::BinOpKind::Rem => Expr::Bin(BinOp::Rem, l, r),
                    ast::BinOpKind::Concat => Expr::Bin(BinOp::Concat, l, r),
                    ast::BinOpKind::Pow => return Err(Unsupported("site 16")),
                }
            }
            ast::Expr::Compare(c) => {
                let mut ops = Vec::new();
                for op in &c.ops {
                    let kind = match op.op {
                        ast::CompareOpKind::Eq => CmpOp::Eq,
                        ast::CompareOpKind::Ne => CmpOp::Ne,
                        ast::CompareOpKind::Lt => CmpOp::Lt,
                        ast::CompareOpKind::Lte => CmpOp::Lte,
                        ast::CompareOpKind::Gt => CmpOp::Gt,
                        ast::CompareOpKind::Gte => CmpOp::Gte,
                        ast::CompareOpKind::In => CmpOp::In,
                        ast::CompareOpKind::NotIn => CmpOp::NotIn,
                    };
                    ops.push((kind, self.expr(&op.expr)?));
                }
                Expr::Compare(self.boxed(&c.expr)?, ops)
            }
            ast::Expr::IfExpr(i) => Expr::IfElse(
                self.boxed(&i.test_expr)?,
                self.boxed(&i.true_expr)?,
                i.false_expr.as_ref().map(|e| self.boxed(e)).transpose()?,
            ),
            ast::Expr::GetAttr(a) => {
                let name = AttrName {
                    sym: self.sym(a.name),
                    text: a.name.into(),
                    dict_method: DICT_METHODS.contains(&a.name),
                };
                Expr::Attr(self.boxed(&a.expr)?, Box::new(name))
            }
            ast::Expr::GetItem(i) => {
                Expr::Item(self.boxed(&i.expr)?, self.boxed(&i.subscript_expr)?)
            }
            ast::Expr::Slice(s) => {
                let mut part = |p: &Option<ast::Expr>| p.as_ref().map(|e| self.expr(e)).transpose();
                let parts = [part(&s.start)?, part(&s.stop)?, part(&s.step)?];
                Expr::Slice(self.boxed(&s.expr)?, Box::new(parts))
            }
            ast::Expr::Filter(f) => self.filter(f)?,
            ast::Expr::Test(t) => {
                let test = test_named(t.name).ok_or(Unsupported("site 17"))?;
                let args = self.positional(&t.args)?;
                if args.len() != test_arity(test) {
                    return Err(Unsupported("site 18"));
                }
                Expr::Test(test, self.boxed(&t.expr)?, args)
            }
            ast::Expr::Call(c) => self.call(c)?,
        })
    }

    fn exprs(&mut self, items: &[ast::Expr]) -> Res<Vec<Expr>> {
        items.iter().map(|e| self.expr(e)).collect()
    }

    fn positional(&mut self, args: &[ast::CallArg]) -> Res<Vec<Expr>> {
        args.iter()
            .map(|a| match a {
                ast::CallArg::Pos(e) => self.expr(e),
                _ => Err(Unsupported("site 19")),
            })
            .collect()
    }

    fn filter(&mut self, f: &ast::Filter) -> Res<Expr> {
        let value = self.boxed(
            f.expr
                .as_ref()
                .ok_or(Unsupported("filter without a value"))?,
        )?;
        match f.name {
            "tojson" => return self.tojson(value, &f.args),
            "selectattr" | "rejectattr" | "select" | "reject" => {
                let by_attr = f.name.ends_with("attr");
                let invert = f.name.starts_with("reject");
                let mut args = f.args.iter();
                let mut out = Vec::new();
                if by_attr {
                    out.push(
                        self.positional(std::slice::from_ref(
                            args.next().ok_or(Unsupported("selectattr"))?,
                        ))?
                        .remove(0),
                    );
                }
                let test = match args.next() {
                    None => None,
                    Some(ast::CallArg::Pos(ast::Expr::Const(c))) => Some(
                        test_named(c.value.as_str().ok_or(Unsupported("select test"))?)
                            .ok_or(Unsupported("select test"))?,
                    ),
                    Some(_) => return Err(Unsupported("select test")),
                };
                for arg in args {
                    match arg {
                        ast::CallArg::Pos(e) => out.push(self.expr(e)?),
                        _ => return Err(Unsupported("select argument")),
                    }
                }
                let test_args = out.len() - usize::from(by_attr);
                if test_args != test.map_or(0, test_arity) {
                    return Err(Unsupported("select arity"));
                }
                return Ok(Expr::Filter(
                    Filter::Select {
                        by_attr,
                        invert,
                        test,
                    },
                    value,
                    out,
                ));
            }
            "map" => {
                return match f.args.as_slice() {
                    [ast::CallArg::Kwarg("attribute", e)] => {
                        Ok(Expr::Filter(Filter::MapAttr, value, vec![self.expr(e)?]))
                    }
                    [ast::CallArg::Pos(ast::Expr::Const(c))] => {
                        let inner = match c.value.as_str() {
                            Some("upper") => MapFilter::Upper,
                            Some("lower") => MapFilter::Lower,
                            Some("trim") => MapFilter::Trim,
                            Some("string") => MapFilter::String,
                            Some("length") | Some("count") => MapFilter::Length,
                            _ => return Err(Unsupported("map filter")),
                        };
                        Ok(Expr::Filter(Filter::MapFilter(inner), value, Vec::new()))
                    }
                    _ => Err(Unsupported("map arguments")),
                };
            }
            _ => {}
        }
        let (filter, arity) = match f.name {
            "trim" => (Filter::Trim, 0),
            "length" | "count" => (Filter::Length, 0),
            "string" => (Filter::String, 0),
            "items" => (Filter::Items, 0),
            "join" => (Filter::Join, 1),
            "safe" => (Filter::Safe, 0),
            "first" => (Filter::First, 0),
            "last" => (Filter::Last, 0),
            "lower" => (Filter::Lower, 0),
            "upper" => (Filter::Upper, 0),
            "capitalize" => (Filter::Capitalize, 0),
            "dictsort" => (Filter::DictSort, 0),
            "default" | "d" => (Filter::Default, 1),
            "list" => (Filter::List, 0),
            "reverse" => (Filter::Reverse, 0),
            "replace" => (Filter::Replace, 2),
            _ => return Err(Unsupported("filter")),
        };
        let args = self.positional(&f.args)?;
        let fits = match filter {
            Filter::Join => args.len() <= 1,
            Filter::Default => (1..=2).contains(&args.len()),
            _ => args.len() == arity,
        };
        if !fits {
            return Err(Unsupported("filter arity"));
        }
        Ok(Expr::Filter(filter, value, args))
    }

    fn tojson(&mut self, value: Box<Expr>, args: &[ast::CallArg]) -> Res<Expr> {
        let (mut indent, mut ensure_ascii, mut sort_keys) = (None, false, false);
        for arg in args {
            let ast::CallArg::Kwarg(name, ast::Expr::Const(c)) = arg else {
                return Err(Unsupported("tojson argument"));
            };
            let v = &c.value;
            match *name {
                "indent" if v.is_none() => indent = None,
                "indent" => {
                    let n = v.as_i64().filter(|n| (0..=64).contains(n));
                    indent = Some(n.ok_or(Unsupported("tojson indent"))? as u8);
                }
                "ensure_ascii" if v.kind() == ValueKind::Bool => ensure_ascii = v.is_true(),
                "sort_keys" if v.kind() == ValueKind::Bool => sort_keys = v.is_true(),
                _ => return Err(Unsupported("tojson argument")),
            }
        }
        let filter = Filter::ToJson {
            indent,
            ensure_ascii,
            sort_keys,
        };
        Ok(Expr::Filter(filter, value, Vec::new()))
    }

    fn call(&mut self, c: &ast::Call) -> Res<Expr> {
        match &c.expr {
            ast::Expr::Var(var) => {
                let mut args = Vec::new();
                for arg in &c.args {
                    args.push(match arg {
                        ast::CallArg::Pos(e) => Arg {
                            name: None,
                            value: self.expr(e)?,
                        },
                        // A namespace field named with a leading `_`, which transformers
                        // refuses: the interpreter raises its error.
                        ast::CallArg::Kwarg(name, _)
                            if var.id == "namespace" && name.starts_with('_') =>
                        {
                            return Ok(Expr::Unsupported)
                        }
                        ast::CallArg::Kwarg(name, e) => Arg {
                            name: Some(self.sym(name)),
                            value: self.expr(e)?,
                        },
                        _ => return Err(Unsupported("site 25")),
                    });
                }
                Ok(Expr::Call(self.sym(var.id), var.id.into(), args))
            }
            ast::Expr::GetAttr(attr) => {
                let method = method_named(attr.name).ok_or(Unsupported("site 26"))?;
                let args = self.positional(&c.args)?;
                Ok(Expr::Method(method, self.boxed(&attr.expr)?, args))
            }
            _ => Err(Unsupported("site 27")),
        }
    }
}

/// `a + b + c` as its operands, left to right.
fn flatten_add<'x, 'a>(e: &'x ast::Expr<'a>, out: &mut Vec<&'x ast::Expr<'a>>) {
    match e {
        ast::Expr::BinOp(b) if matches!(b.op, ast::BinOpKind::Add) => {
            flatten_add(&b.left, out);
            out.push(&b.right);
        }
        other => out.push(other),
    }
}

fn constant(value: &minijinja::Value) -> Res<Const> {
    Ok(match value.kind() {
        ValueKind::Undefined => Const::Undef,
        ValueKind::None => Const::None,
        ValueKind::Bool => Const::Bool(value.is_true()),
        ValueKind::String => Const::Str(value.as_str().ok_or(Unsupported("site 28"))?.into()),
        ValueKind::Number if value.is_integer() => {
            Const::Int(value.as_i64().ok_or(Unsupported("site 29"))?)
        }
        ValueKind::Number => {
            Const::Float(f64::try_from(value.clone()).map_err(|_| Unsupported("site 30"))?)
        }
        _ => return Err(Unsupported("site 31")),
    })
}

fn test_named(name: &str) -> Option<Test> {
    Some(match name {
        "defined" => Test::Defined,
        "undefined" => Test::Undefined,
        "none" => Test::None,
        "string" => Test::String,
        "number" => Test::Number,
        "integer" => Test::Integer,
        "float" => Test::Float,
        "boolean" => Test::Boolean,
        "mapping" => Test::Mapping,
        "sequence" => Test::Sequence,
        "iterable" => Test::Iterable,
        "true" => Test::True,
        "false" => Test::False,
        "eq" | "equalto" | "==" => Test::Eq,
        "ne" | "!=" => Test::Ne,
        "in" => Test::In,
        "odd" => Test::Odd,
        "even" => Test::Even,
        _ => return None,
    })
}

fn test_arity(test: Test) -> usize {
    match test {
        Test::Eq | Test::Ne | Test::In => 1,
        _ => 0,
    }
}

fn method_named(name: &str) -> Option<Method> {
    Some(match name {
        "startswith" => Method::StartsWith,
        "endswith" => Method::EndsWith,
        "split" => Method::Split,
        "strip" => Method::Strip,
        "lstrip" => Method::LStrip,
        "rstrip" => Method::RStrip,
        "upper" => Method::Upper,
        "lower" => Method::Lower,
        "replace" => Method::Replace,
        "items" => Method::Items,
        "keys" => Method::Keys,
        "values" => Method::Values,
        "get" => Method::Get,
        "capitalize" => Method::Capitalize,
        _ => return None,
    })
}
