//! Running a plan: statements write into one string, expressions give [`V`]s, variables live in
//! frames as minijinja scopes them (a `for` or `with` body and a macro call each get one; `if`
//! does not).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::builtins;
use super::ir::{Arg, AttrName, BinOp, CmpOp, Const, Expr, ForLoop, Stmt, Target};
use super::trace::{push_pieces, Piece, SymStr};
use super::value::{compare, contains, equals, slice, Bail, LoopState, Res, Sym, V};
use super::Plan;
use crate::example::json_value;

/// More steps than this and the interpreter takes over (and applies its own limit).
const MAX_STEPS: u64 = 2_000_000;
/// Deeper macro recursion than this and the interpreter takes over.
const MAX_DEPTH: usize = 64;

enum Flow {
    Next,
    Break,
    Continue,
}

/// A variable binding: its name and value.
type Binding<'a> = (Sym, V<'a>);

thread_local! {
    /// The binding stacks of the last render on this thread, emptied, so that the next render
    /// reuses their memory instead of growing new ones.
    /// Boxed, to keep the static TLS space this module takes small (see `fast_bpe`'s `WORK`).
    static SPARE: std::cell::RefCell<Option<Box<Spare>>> = const { std::cell::RefCell::new(None) };
}

/// Emptied buffers of a finished render.
#[derive(Default)]
struct Spare {
    vars: Vec<Binding<'static>>,
    starts: Vec<usize>,
    scratch: Vec<Binding<'static>>,
}

/// `spare`'s memory as an empty vector of bindings of another lifetime (the layout is the
/// same, and collecting an empty vector's iterator into it reuses the buffer).
fn reuse<'x, 'y>(mut spare: Vec<Binding<'x>>) -> Vec<Binding<'y>> {
    spare.clear();
    spare.into_iter().map(|_| unreachable!("emptied")).collect()
}

pub struct Run<'a> {
    pub plan: &'a Plan,
    /// Every binding in scope, frame after frame: frame 0 holds the render's variables, frame
    /// 1 the template's top level; each `for` or `with` body and each macro call opens one.
    vars: Vec<Binding<'a>>,
    /// Where each live frame starts in `vars`.
    starts: Vec<usize>,
    /// The first frame of the macro call running, or 1.
    base: usize,
    out: String,
    /// The first piece written since `out` was last empty, not yet copied: a macro or a block
    /// whose whole output is one borrowed string gives that string without a copy.
    pending: Option<&'a str>,
    /// Macro arguments being evaluated, before their frame exists.
    scratch: Vec<Binding<'a>>,
    steps: u64,
    depth: usize,
    /// The namespaces made in this render: emptied at its end, so that a namespace holding
    /// itself (`{% set ns.me = ns %}`, or through a list or a loop) is freed.
    namespaces: Vec<Rc<RefCell<Vec<Binding<'a>>>>>,
    /// While a trace is recorded (see `trace`): the output as pieces, one list for the render
    /// and one for each capture (a macro's output, a set block) running.
    pieces: Option<Vec<Vec<Piece>>>,
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        for ns in self.namespaces.drain(..) {
            let fields = std::mem::take(&mut *ns.borrow_mut());
            drop(fields);
        }
        let mut starts = std::mem::take(&mut self.starts);
        starts.clear();
        let (vars, scratch) = (
            reuse(std::mem::take(&mut self.vars)),
            reuse(std::mem::take(&mut self.scratch)),
        );
        // A thread being torn down keeps nothing. The box is the one `new` emptied.
        let _ = SPARE.try_with(|cell| {
            let mut cell = cell.borrow_mut();
            let spare = cell.get_or_insert_with(Box::default);
            spare.vars = vars;
            spare.starts = starts;
            spare.scratch = scratch;
        });
    }
}

impl<'a> Run<'a> {
    pub fn new(plan: &'a Plan, context: Vec<Binding<'a>>, capacity: usize) -> Self {
        let spare = SPARE
            .try_with(|cell| {
                let mut cell = cell.borrow_mut();
                let s = cell.as_mut()?;
                Some((
                    std::mem::take(&mut s.vars),
                    std::mem::take(&mut s.starts),
                    std::mem::take(&mut s.scratch),
                ))
            })
            .ok()
            .flatten();
        let (mut vars, mut starts, scratch) = match spare {
            Some((vars, starts, scratch)) if vars.capacity() > 0 => {
                (reuse(vars), starts, reuse(scratch))
            }
            _ => (Vec::with_capacity(64), Vec::with_capacity(16), Vec::new()),
        };
        starts.push(0);
        vars.extend(context);
        starts.push(vars.len());
        Run {
            plan,
            vars,
            starts,
            base: 1,
            out: String::with_capacity(capacity),
            pending: None,
            scratch,
            steps: 0,
            depth: 0,
            namespaces: Vec::new(),
            pieces: None,
        }
    }

    /// A run that records a trace: its output also kept as pieces (see [`Run::finish_traced`]).
    pub fn traced(plan: &'a Plan, context: Vec<Binding<'a>>, capacity: usize) -> Self {
        let mut run = Run::new(plan, context, capacity);
        run.pieces = Some(vec![Vec::new()]);
        run
    }

    /// Notes `text`, written to the output, as a literal piece of a recording.
    #[inline]
    fn note(&mut self, text: &str) {
        if let Some(pieces) = self.pieces.as_mut().and_then(|p| p.last_mut()) {
            push_pieces(pieces, &[Piece::Lit(std::sync::Arc::from(text))]);
        }
    }

    /// Writes a symbolic string: its text to the output, its pieces to the recording.
    fn write_sym(&mut self, s: &SymStr) -> Res<()> {
        let pieces = self
            .pieces
            .as_mut()
            .and_then(|p| p.last_mut())
            .ok_or(Bail)?;
        push_pieces(pieces, &s.pieces);
        self.flush();
        self.out.push_str(&s.text);
        Ok(())
    }

    /// Prints a value that is not a plain borrowed string.
    fn print(&mut self, v: &V<'a>) -> Res<()> {
        if let V::Sym(s) = v {
            return self.write_sym(s);
        }
        self.flush();
        if self.pieces.is_none() {
            return v.print(&mut self.out);
        }
        let mut text = String::new();
        v.print(&mut text)?;
        self.note(&text);
        self.out.push_str(&text);
        Ok(())
    }

    #[inline]
    fn lookup(&self, sym: Sym) -> Option<&V<'a>> {
        // The frames from the running macro's first (or the top level) up, then the top level
        // and the render's variables (a macro sees those, not its caller's frames).
        let (own_start, outer_end) = (self.starts[self.base], self.starts[self.base.min(2)]);
        let mut i = self.vars.len();
        while i > own_start {
            i -= 1;
            if self.vars[i].0 == sym {
                return Some(&self.vars[i].1);
            }
        }
        let mut i = outer_end.min(own_start);
        while i > 0 {
            i -= 1;
            if self.vars[i].0 == sym {
                return Some(&self.vars[i].1);
            }
        }
        None
    }

    /// The value of a variable (undefined, or a global function, when nothing binds it).
    #[inline]
    fn var(&self, sym: Sym) -> V<'a> {
        match self.lookup(sym) {
            Some(v) => v.clone(),
            None if self.plan.globals.contains(&sym) => V::Function,
            None => V::Undef,
        }
    }

    /// `object.name`, reading a variable's value in place rather than copying it.
    fn attr_of(&mut self, object: &'a Expr, name: &AttrName) -> Res<V<'a>> {
        match object {
            Expr::Var(sym) => match self.lookup(*sym) {
                Some(v) => builtins::attr(v, name),
                None => builtins::attr(&self.var(*sym), name),
            },
            other => {
                let object = self.expr(other)?;
                builtins::attr(&object, name)
            }
        }
    }

    /// `object.name` when it is a string field of an example's JSON object, read in place: what
    /// [`builtins::attr`] gives there, without making and dropping a value. `None` for anything
    /// else (the caller then takes the general path).
    #[inline]
    fn str_field(&self, object: &Expr, name: &AttrName) -> Option<&'a str> {
        // A recording reads every field as a value (a content is symbolic).
        if self.pieces.is_some() {
            return None;
        }
        let Expr::Var(sym) = object else {
            return None;
        };
        match self.lookup(*sym)? {
            V::Json(serde_json::Value::Object(map)) if !name.dict_method => {
                let map: &'a serde_json::Map<String, serde_json::Value> = map;
                match json_value::get(map, &name.text)? {
                    serde_json::Value::String(s) => Some(s),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Binds `sym` in the innermost frame.
    fn set(&mut self, sym: Sym, value: V<'a>) {
        let start = *self.starts.last().unwrap_or(&0);
        match self.vars[start..].iter_mut().find(|(s, _)| *s == sym) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((sym, value)),
        }
    }

    fn assign(&mut self, target: &Target, value: V<'a>) -> Res<()> {
        match target {
            Target::Name(sym) => self.set(*sym, value),
            Target::Tuple(names) => {
                let items = value.seq_items().ok_or(Bail)?;
                if items.len() != names.len() {
                    return Err(Bail);
                }
                for (sym, item) in names.iter().zip(items) {
                    self.set(*sym, item);
                }
            }
        }
        Ok(())
    }

    fn block(&mut self, stmts: &'a [Stmt]) -> Res<Flow> {
        for stmt in stmts {
            match self.stmt(stmt)? {
                Flow::Next => {}
                flow => return Ok(flow),
            }
        }
        Ok(Flow::Next)
    }

    /// Runs the template's top level.
    pub fn top(&mut self, stmts: &'a [Stmt]) -> Res<()> {
        match self.block(stmts)? {
            Flow::Next => Ok(()),
            _ => Err(Bail),
        }
    }

    fn step(&mut self) -> Res<()> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Bail);
        }
        Ok(())
    }

    fn stmt(&mut self, stmt: &'a Stmt) -> Res<Flow> {
        self.step()?;
        match stmt {
            Stmt::Raw(text) => self.write(text),
            Stmt::Emit(e) => match self.expr(e)? {
                V::Str(s) => self.write(s),
                v => self.print(&v)?,
            },
            Stmt::EmitJoined(parts) => self.emit_joined(parts)?,
            Stmt::For(f) => return self.for_loop(f),
            Stmt::If(cond, then, otherwise) => {
                let mut branch = if self.truth(cond)? { then } else { otherwise };
                // An `elif` chain is an `if` alone in the branch before it: walked here.
                while let [Stmt::If(cond, then, otherwise)] = branch.as_slice() {
                    self.step()?;
                    branch = if self.truth(cond)? { then } else { otherwise };
                }
                return self.block(branch);
            }
            Stmt::Set(target, e) => {
                let v = self.expr(e)?;
                self.assign(target, v)?;
            }
            Stmt::SetAttr(object, attr, e) => {
                let v = self.expr(e)?;
                let Some(V::Ns(ns)) = self.lookup(*object) else {
                    return Err(Bail);
                };
                let mut fields = ns.borrow_mut();
                match fields.iter_mut().find(|(s, _)| s == attr) {
                    Some(slot) => slot.1 = v,
                    None => fields.push((*attr, v)),
                }
            }
            Stmt::SetBlock(sym, body) => {
                let text = self.capture(|run| run.scoped(body))?;
                self.set(*sym, text);
            }
            Stmt::With(assigns, body) => {
                let mut values = Vec::new();
                for (target, e) in assigns {
                    values.push((target, self.expr(e)?));
                }
                self.push_frame();
                let flow = values
                    .into_iter()
                    .try_for_each(|(t, v)| self.assign(t, v))
                    .and_then(|()| self.block(body));
                self.pop_frame();
                return flow;
            }
            Stmt::DefineMacro(sym, index) => self.set(*sym, V::Macro(*index)),
            Stmt::Do(e) => {
                self.expr(e)?;
            }
            Stmt::Break => return Ok(Flow::Break),
            Stmt::Continue => return Ok(Flow::Continue),
            Stmt::Unsupported => return Err(Bail),
        }
        Ok(Flow::Next)
    }

    /// A body in a frame of its own.
    fn scoped(&mut self, body: &'a [Stmt]) -> Res<()> {
        self.push_frame();
        let flow = self.block(body);
        self.pop_frame();
        match flow? {
            Flow::Next => Ok(()),
            _ => Err(Bail),
        }
    }

    fn push_frame(&mut self) {
        self.starts.push(self.vars.len());
    }

    fn pop_frame(&mut self) {
        if let Some(start) = self.starts.pop() {
            self.vars.truncate(start);
        }
    }

    /// Empties the innermost frame.
    fn clear_frame(&mut self) {
        let start = *self.starts.last().unwrap_or(&0);
        self.vars.truncate(start);
    }

    /// Writes a string that lives as long as the render.
    fn write(&mut self, s: &'a str) {
        if self.pieces.is_some() {
            self.note(s);
        }
        if self.out.is_empty() && self.pending.is_none() {
            self.pending = Some(s);
        } else {
            self.flush();
            self.out.push_str(s);
        }
    }

    fn flush(&mut self) {
        if let Some(piece) = self.pending.take() {
            self.out.push_str(piece);
        }
    }

    /// The whole output.
    pub fn finish(mut self) -> String {
        self.flush();
        std::mem::take(&mut self.out)
    }

    /// The whole output of a recording, and its pieces.
    pub fn finish_traced(mut self) -> Option<(String, Vec<Piece>)> {
        let pieces = self.pieces.take()?.pop()?;
        Some((self.finish(), pieces))
    }

    /// What `f` writes, kept apart from the output: borrowed when it is one borrowed piece.
    fn capture(&mut self, f: impl FnOnce(&mut Self) -> Res<()>) -> Res<V<'a>> {
        if let Some(pieces) = self.pieces.as_mut() {
            pieces.push(Vec::new());
        }
        let saved = (std::mem::take(&mut self.out), self.pending.take());
        let result = f(self);
        let captured = self.pieces.as_mut().and_then(Vec::pop);
        let symbolic = captured.filter(|p| p.iter().any(|p| matches!(p, Piece::Hole(_))));
        let text = match (self.out.is_empty(), self.pending.take()) {
            (true, Some(piece)) => V::Str(piece),
            (true, None) => V::Str(""),
            (false, piece) => {
                if let Some(piece) = piece {
                    self.out.push_str(piece);
                }
                V::Owned(Rc::from(self.out.as_str()))
            }
        };
        self.out = saved.0;
        self.pending = saved.1;
        let text = match symbolic {
            Some(pieces) => {
                let concrete = match &text {
                    V::Str(s) => Rc::from(*s),
                    V::Owned(s) => s.clone(),
                    _ => return Err(Bail),
                };
                V::Sym(Rc::new(SymStr {
                    text: concrete,
                    pieces,
                }))
            }
            None => text,
        };
        result.map(|()| text)
    }

    fn emit_joined(&mut self, parts: &'a [Expr]) -> Res<()> {
        let first = self.expr(&parts[0])?;
        if first.as_str().is_none() {
            let mut acc = first;
            for part in &parts[1..] {
                let v = self.expr(part)?;
                acc = builtins::binop(BinOp::Add, &acc, &v)?;
            }
            return self.print(&acc);
        }
        // A string plus anything but a string fails in the interpreter, so the parts are
        // written as they come (a render that gives up discards what it wrote).
        self.write_value(first)?;
        for part in &parts[1..] {
            match part {
                Expr::Const(Const::Str(s)) => self.write(s),
                Expr::Attr(object, name) => match self.str_field(object, name) {
                    Some(s) => self.write(s),
                    None => {
                        let v = self.expr(part)?;
                        self.write_value(v)?;
                    }
                },
                Expr::Var(sym) => match self.lookup(*sym) {
                    Some(V::Str(s)) => {
                        let s: &'a str = s;
                        self.write(s)
                    }
                    _ => {
                        let v = self.var(*sym);
                        self.write_value(v)?
                    }
                },
                _ => {
                    let v = self.expr(part)?;
                    self.write_value(v)?;
                }
            }
        }
        Ok(())
    }

    /// Writes a string value; anything else gives up.
    fn write_value(&mut self, v: V<'a>) -> Res<()> {
        match v {
            V::Str(s) => self.write(s),
            V::Owned(s) => {
                self.note(&s);
                self.flush();
                self.out.push_str(&s);
            }
            V::Sym(s) => self.write_sym(&s)?,
            _ => return Err(Bail),
        }
        Ok(())
    }

    /// Runs a loop; a `break` or `continue` in its `else` block is the enclosing loop's.
    fn for_loop(&mut self, f: &'a ForLoop) -> Res<Flow> {
        let iterable = self.expr(&f.iter)?;
        let mut items = builtins::iterate(&iterable)?;
        // MLX Node's engine iterates a string without knowing its length or its last
        // character (Python knows both).
        let mlx_string = self.plan.mlx && iterable.as_str().is_some();
        let sized = !matches!(iterable, V::Iter(_)) && !mlx_string;
        self.push_frame();
        let result = (|| {
            if let Some(cond) = &f.filter {
                let mut kept = Vec::with_capacity(items.len());
                for item in items.iter() {
                    self.assign(&f.target, item.clone())?;
                    if self.truth(cond)? {
                        kept.push(item.clone());
                    }
                }
                items = Rc::new(kept);
            }
            if items.is_empty() {
                // Without the target a filter left bound.
                self.clear_frame();
                return self.block(&f.else_body);
            }
            let state = Rc::new(LoopState {
                items,
                index: Cell::new(0),
                sized,
                last_known: !mlx_string,
            });
            // jinja2 runs the else block when no iteration reached the end of the body (see
            // `python_for_else`); minijinja only for a loop with nothing to iterate.
            let python_else = !self.plan.mlx && !f.else_body.is_empty();
            let mut completed = false;
            for i in 0..state.items.len() {
                self.step()?;
                // Each iteration starts with a fresh scope: what one sets, the next does not see.
                self.clear_frame();
                self.set(self.plan.loop_sym, V::Loop(state.clone()));
                state.index.set(i);
                self.assign(&f.target, state.items[i].clone())?;
                match self.block(&f.body)? {
                    // minijinja then runs the else block: the interpreter's.
                    Flow::Break if !python_else && i == 0 && !f.else_body.is_empty() => {
                        return Err(Bail)
                    }
                    Flow::Break => break,
                    Flow::Next => completed = true,
                    Flow::Continue => {}
                }
            }
            if python_else && !completed {
                self.clear_frame();
                return self.block(&f.else_body);
            }
            Ok(Flow::Next)
        })();
        self.pop_frame();
        result
    }

    /// [`Run::expr`] with variables and constants read in place, without a call: most operands
    /// are one or the other.
    #[inline(always)]
    fn value(&mut self, e: &'a Expr) -> Res<V<'a>> {
        match e {
            Expr::Var(sym) => Ok(self.var(*sym)),
            Expr::Const(Const::Str(s)) => Ok(V::Str(s)),
            Expr::Const(Const::Int(i)) => Ok(V::Int(*i)),
            Expr::Const(Const::Bool(b)) => Ok(V::Bool(*b)),
            _ => self.expr(e),
        }
    }

    pub fn expr(&mut self, e: &'a Expr) -> Res<V<'a>> {
        Ok(match e {
            Expr::Var(sym) => self.var(*sym),
            Expr::Const(c) => match c {
                Const::Undef => V::Undef,
                Const::None => V::None,
                Const::Bool(b) => V::Bool(*b),
                Const::Int(i) => V::Int(*i),
                Const::Float(f) => V::Float(*f),
                Const::Str(s) => V::Str(s),
            },
            Expr::List(items) => V::List(Rc::new(
                items.iter().map(|e| self.expr(e)).collect::<Res<_>>()?,
            )),
            Expr::Tuple(items) => V::Tuple(Rc::new(
                items.iter().map(|e| self.expr(e)).collect::<Res<_>>()?,
            )),
            Expr::Map(pairs) => {
                let mut out = Vec::with_capacity(pairs.len());
                for (k, e) in pairs {
                    out.push((Rc::from(k.as_ref()), self.expr(e)?));
                }
                V::Map(Rc::new(out))
            }
            Expr::Not(e) => V::Bool(!self.truth(e)?),
            Expr::Neg(e) => match self.expr(e)? {
                V::Int(i) => V::Int(i.checked_neg().ok_or(Bail)?),
                V::Float(f) => V::Float(-f),
                _ => return Err(Bail),
            },
            Expr::Bin(op, l, r) => {
                let (l, r) = (self.value(l)?, self.value(r)?);
                builtins::binop(*op, &l, &r)?
            }
            Expr::And(l, r) => {
                let l = self.expr(l)?;
                if l.truthy()? {
                    self.expr(r)?
                } else {
                    l
                }
            }
            Expr::Or(l, r) => {
                let l = self.expr(l)?;
                if l.truthy()? {
                    l
                } else {
                    self.expr(r)?
                }
            }
            Expr::Compare(first, ops) => {
                let mut left = self.value(first)?;
                for (op, e) in ops {
                    let right = self.value(e)?;
                    if !compare_op(*op, &left, &right)? {
                        return Ok(V::Bool(false));
                    }
                    left = right;
                }
                V::Bool(true)
            }
            Expr::IfElse(test, yes, no) => {
                if self.truth(test)? {
                    self.expr(yes)?
                } else {
                    match no {
                        Some(no) => self.expr(no)?,
                        None => V::Undef,
                    }
                }
            }
            Expr::Attr(object, name) => self.attr_of(object, name)?,
            Expr::Item(object, key) => {
                let (object, key) = (self.value(object)?, self.value(key)?);
                builtins::item(&object, &key)?
            }
            Expr::Slice(object, parts) => {
                let object = self.expr(object)?;
                let mut bounds = [None; 3];
                for (bound, part) in bounds.iter_mut().zip(parts.iter()) {
                    *bound = match part {
                        None => None,
                        Some(e) => match self.expr(e)? {
                            V::Int(i) => Some(i),
                            V::None => None,
                            _ => return Err(Bail),
                        },
                    };
                }
                slice(&object, bounds, !self.plan.mlx)?
            }
            Expr::Filter(filter, value, args) => {
                let value = self.value(value)?;
                let plan = self.plan;
                self.with_args(args, |args| builtins::filter(plan, *filter, value, args))?
            }
            Expr::Test(test, value, args) => {
                let value = self.expr(value)?;
                let python = !self.plan.mlx;
                V::Bool(self.with_args(args, |args| builtins::test(*test, &value, args, python))?)
            }
            Expr::Method(method, object, args) => {
                let object = self.expr(object)?;
                self.with_args(args, |args| builtins::method(*method, &object, args))?
            }
            Expr::Call(sym, name, args) => self.call(*sym, name, args)?,
            Expr::Unsupported => return Err(Bail),
        })
    }

    /// Whether `e` is true, as `if` takes it: comparisons, tests and their `and`, `or` and `not`
    /// decided without making a value of the answer.
    fn truth(&mut self, e: &'a Expr) -> Res<bool> {
        match e {
            Expr::Compare(first, ops) if ops.len() == 1 => {
                let (op, right) = (&ops[0].0, &ops[0].1);
                // `message.role == 'user'`: the field compared where it lies.
                if let (
                    CmpOp::Eq | CmpOp::Ne,
                    Expr::Attr(object, name),
                    Expr::Const(Const::Str(c)),
                ) = (op, &**first, right)
                {
                    if let Some(s) = self.str_field(object, name) {
                        return Ok((s == &**c) == (*op == CmpOp::Eq));
                    }
                }
                let left = self.value(first)?;
                let right = self.value(right)?;
                compare_op(*op, &left, &right)
            }
            Expr::Test(test, value, args) if args.is_empty() => match &**value {
                Expr::Var(sym) => match self.lookup(*sym) {
                    Some(v) => builtins::test(*test, v, &[], !self.plan.mlx),
                    None => builtins::test(*test, &self.var(*sym), &[], !self.plan.mlx),
                },
                other => {
                    let value = self.expr(other)?;
                    builtins::test(*test, &value, &[], !self.plan.mlx)
                }
            },
            Expr::Not(inner) => Ok(!self.truth(inner)?),
            Expr::And(l, r) => Ok(self.truth(l)? && self.truth(r)?),
            Expr::Or(l, r) => Ok(self.truth(l)? || self.truth(r)?),
            Expr::Var(sym) => match self.lookup(*sym) {
                Some(v) => v.truthy(),
                None => self.var(*sym).truthy(),
            },
            other => self.expr(other)?.truthy(),
        }
    }

    /// `f` of the values of `args`, without a heap allocation for up to two of them.
    fn with_args<T>(&mut self, args: &'a [Expr], f: impl FnOnce(&[V<'a>]) -> Res<T>) -> Res<T> {
        match args {
            [] => f(&[]),
            [a] => {
                let a = self.value(a)?;
                f(std::slice::from_ref(&a))
            }
            [a, b] => {
                let values = [self.value(a)?, self.value(b)?];
                f(&values)
            }
            more => {
                let values = more.iter().map(|e| self.expr(e)).collect::<Res<Vec<_>>>()?;
                f(&values)
            }
        }
    }

    fn call(&mut self, sym: Sym, name: &str, args: &'a [Arg]) -> Res<V<'a>> {
        match self.lookup(sym) {
            Some(V::Macro(index)) => {
                let index = *index;
                self.call_macro(index, args)
            }
            Some(_) => Err(Bail),
            None if name == "namespace" => {
                // Its fields straight from the keyword arguments, a later one replacing an
                // earlier one of the same name.
                let mut fields: Vec<Binding<'a>> = Vec::with_capacity(args.len());
                for arg in args {
                    let name = arg.name.ok_or(Bail)?;
                    let value = self.expr(&arg.value)?;
                    match fields.iter_mut().find(|(s, _)| *s == name) {
                        Some(slot) => slot.1 = value,
                        None => fields.push((name, value)),
                    }
                }
                let ns = Rc::new(RefCell::new(fields));
                self.namespaces.push(ns.clone());
                Ok(V::Ns(ns))
            }
            None => {
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    values.push((arg.name, self.expr(&arg.value)?));
                }
                builtins::function(name, values, !self.plan.mlx)
            }
        }
    }

    fn call_macro(&mut self, index: usize, args: &'a [Arg]) -> Res<V<'a>> {
        let plan = self.plan;
        let m = &plan.macros[index];
        if self.depth >= MAX_DEPTH || m.params.len() > 64 {
            return Err(Bail);
        }
        // The arguments are evaluated in the caller's scope onto the scratch stack (nested
        // calls stack above), then bound in the macro's frame; `bound` has a bit per parameter.
        let mark = self.scratch.len();
        let (mut given, mut bound) = (0u64, 0u64);
        let mut positional = 0;
        for arg in args {
            let value = self.value(&arg.value)?;
            let slot = match arg.name {
                None => {
                    positional += 1;
                    positional - 1
                }
                Some(name) => m.params.iter().position(|p| *p == name).ok_or(Bail)?,
            };
            if slot >= m.params.len() || given & (1 << slot) != 0 {
                return Err(Bail);
            }
            given |= 1 << slot;
            // jinja2 binds an undefined argument as given; minijinja (MLX Node's rendering)
            // gives the parameter its default.
            if !value.is_undef() || !plan.mlx {
                bound |= 1 << slot;
                self.scratch.push((m.params[slot], value));
            }
        }
        self.push_frame();
        let frame = self.starts.len() - 1;
        let given = self.scratch.drain(mark..);
        self.vars.extend(given);
        let saved_base = self.base;
        self.depth += 1;
        let result = (|| {
            self.base = frame;
            // The frame holds only the bound parameters, each once: the others are pushed.
            for (i, param) in m.params.iter().enumerate() {
                if bound & (1 << i) == 0 {
                    let value = match &m.defaults[i] {
                        Some(Expr::Const(Const::Bool(b))) => V::Bool(*b),
                        Some(default) => self.expr(default)?,
                        None => V::Undef,
                    };
                    self.vars.push((*param, value));
                }
            }
            self.capture(|run| match run.block(&m.body)? {
                Flow::Next => Ok(()),
                _ => Err(Bail),
            })
        })();
        self.depth -= 1;
        self.base = saved_base;
        self.pop_frame();
        result
    }
}

fn compare_op<'a>(op: CmpOp, l: &V<'a>, r: &V<'a>) -> Res<bool> {
    use std::cmp::Ordering::*;
    Ok(match op {
        CmpOp::Eq => equals(l, r)?,
        CmpOp::Ne => !equals(l, r)?,
        CmpOp::Lt => compare(l, r)? == Less,
        CmpOp::Lte => compare(l, r)? != Greater,
        CmpOp::Gt => compare(l, r)? == Greater,
        CmpOp::Gte => compare(l, r)? != Less,
        CmpOp::In => contains(r, l)?,
        CmpOp::NotIn => !contains(r, l)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_that_holds_itself_is_freed_with_the_render() {
        for source in [
            "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns.a }}",
            "{% set ns = namespace(a=1) %}{% set ns.l = [ns] %}{{ ns.a }}",
            "{% set ns = namespace(a=1) %}{% for x in [ns] %}{% set ns.l = loop %}{% endfor %}{{ ns.a }}",
        ] {
            let plan = Plan::compile(source, Default::default(), &[], false).expect("a plan");
            let mut run = Run::new(&plan, Vec::new(), 0);
            assert!(run.top(&plan.body).is_ok(), "{source}");
            let held = Rc::downgrade(&run.namespaces[0]);
            assert_eq!(run.finish(), "1");
            assert!(held.upgrade().is_none(), "{source}: the namespace outlived the render");
        }
    }

    #[test]
    fn reused_bindings_keep_their_buffer() {
        let mut spare: Vec<Binding<'static>> = Vec::with_capacity(32);
        spare.push((1, V::Int(1)));
        let at = spare.as_ptr() as usize;
        let text = String::from("a shorter lifetime");
        let mut reused: Vec<Binding<'_>> = reuse(spare);
        assert!(reused.is_empty());
        assert_eq!((reused.capacity(), reused.as_ptr() as usize), (32, at));
        reused.push((2, V::Str(&text)));
        assert_eq!(reused.len(), 1);
    }
}
