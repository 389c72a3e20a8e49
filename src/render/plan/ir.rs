//! A render plan's instructions: the template's statements and expressions with whitespace
//! control already applied, names interned, filters, tests and methods resolved to what they
//! do, and constants held ready to borrow.

use super::value::Sym;

#[repr(u8)]
pub enum Stmt {
    Raw(Box<str>),
    Emit(Expr),
    /// `{{ a + b + c }}`: each operand written in turn when all are strings.
    EmitJoined(Vec<Expr>),
    For(Box<ForLoop>),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    Set(Target, Expr),
    /// `{% set ns.attr = value %}`.
    SetAttr(Sym, Sym, Expr),
    /// `{% set name %}...{% endset %}`.
    SetBlock(Sym, Vec<Stmt>),
    With(Vec<(Target, Expr)>, Vec<Stmt>),
    /// `{% macro %}`: binds the name to macro `usize` of the plan.
    DefineMacro(Sym, usize),
    Do(Expr),
    Break,
    Continue,
    /// A statement the plan does not implement: reaching it hands the render to the interpreter.
    Unsupported,
}

pub struct ForLoop {
    pub target: Target,
    pub iter: Expr,
    pub filter: Option<Expr>,
    pub body: Vec<Stmt>,
    pub else_body: Vec<Stmt>,
}

pub enum Target {
    Name(Sym),
    Tuple(Vec<Sym>),
}

pub struct Macro {
    pub params: Vec<Sym>,
    /// The default of each parameter that has one, aligned with `params`.
    pub defaults: Vec<Option<Expr>>,
    pub body: Vec<Stmt>,
}

pub enum Const {
    Undef,
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Box<str>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
    Concat,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Lte,
    Gt,
    Gte,
    In,
    NotIn,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    Trim,
    Length,
    /// `tojson`, with its `indent`, `ensure_ascii` and `sort_keys` when given.
    ToJson {
        indent: Option<u8>,
        ensure_ascii: bool,
        sort_keys: bool,
    },
    DictSort,
    Capitalize,
    /// `select`/`reject` (`by_attr` false: the first argument is the test's first argument) and
    /// `selectattr`/`rejectattr` (the first argument names the attribute tested).
    Select {
        by_attr: bool,
        invert: bool,
        test: Option<Test>,
    },
    /// `map(attribute='name')`: the argument is the name.
    MapAttr,
    /// `map('filter')`, for the filters that take no argument.
    MapFilter(MapFilter),
    String,
    Items,
    Join,
    Safe,
    First,
    Last,
    Lower,
    Upper,
    Default,
    List,
    Reverse,
    Replace,
}

/// The filters `map` can apply.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MapFilter {
    Upper,
    Lower,
    Trim,
    String,
    Length,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Test {
    Defined,
    Undefined,
    None,
    String,
    Number,
    Integer,
    Float,
    Boolean,
    Mapping,
    Sequence,
    Iterable,
    True,
    False,
    Eq,
    Ne,
    In,
    Odd,
    Even,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Method {
    StartsWith,
    EndsWith,
    Split,
    Strip,
    LStrip,
    RStrip,
    Upper,
    Lower,
    Replace,
    Items,
    Keys,
    Values,
    Get,
    Capitalize,
}

/// The name of `object.name`, with what every render would otherwise work out again.
pub struct AttrName {
    pub sym: Sym,
    pub text: Box<str>,
    /// A dict method's name (`items`, `get`, ...): on a dict, jinja2 finds the method first.
    pub dict_method: bool,
}

pub struct Arg {
    pub name: Option<Sym>,
    pub value: Expr,
}

#[repr(u8)]
pub enum Expr {
    Var(Sym),
    Const(Const),
    List(Vec<Expr>),
    /// A tuple literal: a list that prints as Python's tuple.
    Tuple(Vec<Expr>),
    Map(Vec<(Box<str>, Expr)>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    IfElse(Box<Expr>, Box<Expr>, Option<Box<Expr>>),
    Attr(Box<Expr>, Box<AttrName>),
    Item(Box<Expr>, Box<Expr>),
    Slice(Box<Expr>, Box<[Option<Expr>; 3]>),
    Filter(Filter, Box<Expr>, Vec<Expr>),
    Test(Test, Box<Expr>, Vec<Expr>),
    /// A call of a name: a macro, or a global function (`namespace`, `range`, ...).
    Call(Sym, Box<str>, Vec<Arg>),
    Method(Method, Box<Expr>, Vec<Expr>),
    /// An expression the plan does not implement: evaluating it hands the render to the
    /// interpreter.
    Unsupported,
}
