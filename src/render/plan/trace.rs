//! Render traces: a plan's render of one shape of example, kept so that the next example of
//! that shape is written without running the plan. A shape is everything a render reads except
//! the messages' texts, their `content` (and `reasoning_content`, `thinking`) strings: roles,
//! other fields, options. A trace is the render's text as literal pieces and holes, each hole
//! an expression of the contents (`content`, stripped, a part of it split on a separator), with
//! guards: every fact about the contents the render's
//! course depended on (`'</think>' in content`, `content.startswith(...)`, whether it is
//! empty, how many parts a split gives). An example whose contents meet the guards of a kept
//! trace is the trace's pieces with its holes filled.
//!
//! A trace is recorded by running the plan with each content as a symbolic string
//! ([`SymStr`]): it carries its text, so the render goes on as usual, and how it was made from
//! the contents. Only the operations here know symbolic strings; any other operation on one gives
//! up (the plan's [`Bail`]), and so does reading a message whole (`tojson`, printing it), so
//! nothing about a content reaches the text or the render's course unrecorded. A recorded
//! render is checked against the plain render of the same example before it is kept, and the
//! first replays of each trace against plain renders too; any difference retires the shape
//! for good.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;
use serde_json::Value as Json;

use super::replay::Program;
use super::trace_expr::{answer, strip_text, Guard, SExpr};
pub use super::trace_expr::{Piece, Side, Test};
use super::value::{Bail, Res, V};
use crate::example::json_value::{self, write_len, write_str, write_tagged};
use crate::render::memo::{write_options, Clock};
use crate::render::RenderOptions;

/// A string made from the contents during a recording: its text, and its pieces.
#[derive(Debug)]
pub struct SymStr {
    pub text: Rc<str>,
    pub pieces: Vec<Piece>,
}

impl SymStr {
    pub fn of<'a>(expr: SExpr, text: &str) -> V<'a> {
        V::Sym(Rc::new(SymStr {
            text: Rc::from(text),
            pieces: vec![Piece::Hole(Arc::new(expr))],
        }))
    }

    /// The expression where the string is one hole and nothing else.
    pub fn single(&self) -> Res<&Arc<SExpr>> {
        match self.pieces.as_slice() {
            [Piece::Hole(e)] => Ok(e),
            _ => Err(Bail),
        }
    }
}

/// Appends `pieces` to `out`, literals next to each other joined.
pub fn push_pieces(out: &mut Vec<Piece>, pieces: &[Piece]) {
    for piece in pieces {
        match (out.last_mut(), piece) {
            (Some(Piece::Lit(a)), Piece::Lit(b)) => {
                let mut joined = String::with_capacity(a.len() + b.len());
                joined.push_str(a);
                joined.push_str(b);
                *a = Arc::from(joined);
            }
            _ => out.push(piece.clone()),
        }
    }
}

/// A string value as pieces: a symbolic string's own, or one literal.
pub fn pieces_of(v: &V<'_>) -> Res<Vec<Piece>> {
    Ok(match v {
        V::Sym(s) => s.pieces.clone(),
        other => vec![Piece::Lit(Arc::from(&*other.py_string()?))],
    })
}

/// `a + b` (or `a ~ b`) where either is symbolic.
pub fn concat<'a>(a: &V<'a>, b: &V<'a>) -> Res<V<'a>> {
    let text_of = |v: &V<'_>| -> Res<Rc<str>> {
        match v {
            V::Sym(s) => Ok(s.text.clone()),
            other => other.py_string(),
        }
    };
    let (ta, tb) = (text_of(a)?, text_of(b)?);
    let mut pieces = pieces_of(a)?;
    push_pieces(&mut pieces, &pieces_of(b)?);
    let mut text = String::with_capacity(ta.len() + tb.len());
    text.push_str(&ta);
    text.push_str(&tb);
    Ok(V::Sym(Rc::new(SymStr {
        text: Rc::from(text),
        pieces,
    })))
}

/// `s.strip()` and friends of a symbolic string.
pub fn strip<'a>(s: &SymStr, side: Side, chars: Option<&str>) -> Res<V<'a>> {
    let expr = s.single()?.clone();
    let set: Option<Vec<char>> = chars.map(|c| c.chars().collect());
    let text = strip_text(&s.text, side, set.as_deref());
    Ok(SymStr::of(
        SExpr::Strip(expr, side, chars.map(Arc::from)),
        text,
    ))
}

/// `s.split(sep)` of a symbolic string: its parts, their number a guard.
pub fn split<'a>(s: &SymStr, sep: &str) -> Res<V<'a>> {
    let expr = s.single()?.clone();
    let sep: Arc<str> = Arc::from(sep);
    let parts: Vec<&str> = s.text.split(&*sep).collect();
    record(&expr, Test::Parts(sep.clone()), parts.len() as u64)?;
    Ok(V::List(Rc::new(
        parts
            .iter()
            .enumerate()
            .map(|(k, part)| SymStr::of(SExpr::Part(expr.clone(), sep.clone(), k as u32), part))
            .collect(),
    )))
}

/// A test of a symbolic string, its answer recorded as a guard.
pub fn test(s: &SymStr, test: Test) -> Res<bool> {
    let expr = s.single()?.clone();
    let answer = answer(&s.text, &test);
    record(&expr, test, answer)?;
    Ok(answer != 0)
}

/// What the recording render on this thread has learned, and which JSON nodes hold the
/// contents.
struct Recording {
    /// The string node of each slot (null where a message has none there).
    slots: Vec<*const Json>,
    /// The message objects: reading one whole would read its content unrecorded.
    messages: Vec<*const Json>,
    guards: Vec<Guard>,
}

thread_local! {
    /// Whether a recording runs on this thread (read on every string the plan lifts).
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// The recording running on this thread. Boxed, to keep this module's static TLS small.
    static RECORDING: RefCell<Option<Box<Recording>>> = const { RefCell::new(None) };
}

fn record(of: &Arc<SExpr>, test: Test, answer: u64) -> Res<()> {
    RECORDING.with(|r| {
        let mut r = r.borrow_mut();
        let r = r.as_mut().ok_or(Bail)?;
        let guard = Guard {
            of: of.clone(),
            test,
            answer,
        };
        if !r.guards.contains(&guard) {
            r.guards.push(guard);
        }
        Ok(())
    })
}

/// The symbolic string of `json` where a recording runs and it is a slot.
#[inline]
pub fn lifted<'a>(json: &Json) -> Option<V<'a>> {
    if !ACTIVE.with(Cell::get) {
        return None;
    }
    let text = json.as_str()?;
    RECORDING.with(|r| {
        let r = r.borrow();
        let slot = r
            .as_ref()?
            .slots
            .iter()
            .position(|&p| std::ptr::eq(p, json))?;
        Some(SymStr::of(SExpr::Slot(slot as u32), text))
    })
}

/// Whether reading `json` whole (dumping, printing) must give up: a recording runs and it is a
/// message, which holds a content.
#[inline]
pub fn holds_content(json: &Json) -> bool {
    ACTIVE.with(Cell::get)
        && RECORDING.with(|r| {
            r.borrow()
                .as_ref()
                .is_some_and(|r| r.messages.iter().any(|&p| std::ptr::eq(p, json)))
        })
}

/// Runs `f` as a recording over `messages`: its result, and the guards it recorded.
fn recording<T>(messages: &[Json], f: impl FnOnce() -> T) -> (T, Vec<Guard>) {
    let recording = Recording {
        slots: messages
            .iter()
            .flat_map(|m| {
                SLOT_FIELDS
                    .iter()
                    .map(move |f| match json_value::field(m, f) {
                        Some(c @ Json::String(_)) => c as *const Json,
                        _ => std::ptr::null(),
                    })
            })
            .collect(),
        messages: messages.iter().map(|m| m as *const Json).collect(),
        guards: Vec::new(),
    };
    RECORDING.with(|r| *r.borrow_mut() = Some(Box::new(recording)));
    ACTIVE.with(|a| a.set(true));
    // Cleared even where `f` unwinds.
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(false));
            let _ = RECORDING.try_with(|r| r.borrow_mut().take());
        }
    }
    let done = Done;
    let out = f();
    let guards = RECORDING
        .with(|r| r.borrow_mut().take())
        .map(|r| r.guards)
        .unwrap_or_default();
    drop(done);
    (out, guards)
}

/// A kept render of one shape.
#[derive(Debug)]
pub struct Trace {
    program: Program,
    /// Replays still to check against a plain render.
    checks_left: AtomicU32,
}

/// Replays checked against a plain render before a trace is trusted.
const CHECKED_REPLAYS: u32 = 2;
/// Traces kept for one shape (one for each course its contents take).
const TRACES_PER_SHAPE: usize = 4;
/// Shapes a template keeps traces for at once.
const SHAPES: usize = 512;
/// Every this many renders, traces that wrote fewer than a quarter of them are left off.
const TRIAL: u64 = 4096;
/// Shapes whose key is longer than this are rendered plainly.
const MAX_KEY: usize = 16 * 1024;

/// The traces of one text: kept traces, or none ever (a render that could not be recorded,
/// or a trace that was wrong).
enum Shape {
    /// Rendered once: a shape is recorded the second time it comes.
    Seen,
    Traced(Vec<Arc<Trace>>),
    Retired,
}

/// The traces a plan keeps, by shape.
#[derive(Default)]
pub struct Traces {
    shapes: RwLock<FxHashMap<Box<[u8]>, Shape>>,
    stats: Counters,
    /// Set once traces are found not to pay (see [`TRIAL`]).
    off: AtomicBool,
    /// Whether renders print the clock's second: a shape is then also that second.
    clock: bool,
}

#[derive(Default)]
struct Counters {
    attempts: AtomicU64,
    replayed: AtomicU64,
    recorded: AtomicU64,
    wrong: AtomicU64,
}

/// What a plan's traces did (for tests and benchmarks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Renders written by a trace.
    pub replayed: u64,
    /// Traces kept.
    pub recorded: u64,
    /// Traces that gave other text than the plan's, and were retired.
    pub wrong: u64,
}

/// The fields of a message whose strings a trace leaves open: the text and the reasoning.
const SLOT_FIELDS: [&str; 3] = ["content", "reasoning_content", "thinking"];

/// The string fields of each message a trace's holes read, [`SLOT_FIELDS`] of each message in
/// turn (`None` where a message has no string there).
fn contents(messages: &[Json]) -> Vec<Option<&str>> {
    let mut slots = Vec::with_capacity(SLOT_FIELDS.len() * messages.len());
    for message in messages {
        let mut fields = [None; SLOT_FIELDS.len()];
        if let Json::Object(map) = message {
            // One pass over the message's keys rather than a lookup per field.
            for (key, value) in map {
                if let Some(k) = SLOT_FIELDS.iter().position(|f| f == key) {
                    fields[k] = value.as_str();
                }
            }
        }
        slots.extend_from_slice(&fields);
    }
    slots
}

impl Traces {
    /// The traces of a template's plan: none where its renders may print fractions of a
    /// second (they would not repeat), the clock's second in every shape where they may print
    /// the date or the time (see `memo`).
    pub fn for_source(source: &str) -> Option<Traces> {
        let clock = match Clock::of(source) {
            Clock::Never => false,
            Clock::Seconds => true,
            Clock::Finer => return None,
        };
        Some(Traces {
            clock,
            ..Traces::default()
        })
    }

    /// The render of `messages` by a kept trace, or by `plain` (the plan's render), recording
    /// a trace of `record` (the plan's render with contents symbolic) where the shape has none
    /// that fits. `None` where the plan declines.
    pub fn render(
        &self,
        messages: &[Json],
        opts: &RenderOptions,
        plain: impl Fn() -> Option<String>,
        record: impl FnOnce() -> Option<(String, Vec<Piece>)>,
    ) -> Option<String> {
        if self.off.load(Ordering::Relaxed) {
            return plain();
        }
        let attempts = self.stats.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        // Data whose shapes rarely repeat (every example its own tool calls, say) pays for
        // keys and recordings it gets nothing back for: traces are then left off.
        if attempts.is_multiple_of(TRIAL)
            && self.stats.replayed.load(Ordering::Relaxed) * 4 < attempts
        {
            self.off.store(true, Ordering::Relaxed);
        }
        let Some(mut key) = shape_key(messages, opts) else {
            return plain();
        };
        if self.clock {
            let (fixed, second) = crate::render::strftime_second();
            key.push(u8::from(fixed));
            key.extend_from_slice(&second.to_le_bytes());
        }
        // The first kept trace whose guards the contents meet, and its text.
        let (known, found) = {
            let shapes = self.shapes.read().ok()?;
            match shapes.get(key.as_slice()) {
                Some(Shape::Retired) => {
                    drop(shapes);
                    return plain();
                }
                Some(Shape::Traced(traces)) => {
                    let slots = contents(messages);
                    (
                        traces.len(),
                        traces
                            .iter()
                            .find_map(|t| t.replay(&slots).map(|text| (t.clone(), text))),
                    )
                }
                Some(Shape::Seen) => (0, None),
                None => {
                    drop(shapes);
                    // A shape met once is only noted: most data repeats its shapes, but a
                    // shape that never comes back is not worth a recording.
                    if let Ok(mut shapes) = self.shapes.write() {
                        if !shapes.contains_key(key.as_slice()) {
                            make_room(&mut shapes);
                            shapes.insert(key.into_boxed_slice(), Shape::Seen);
                        }
                    }
                    return plain();
                }
            }
        };
        if let Some((trace, text)) = found {
            if trace
                .checks_left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                let checked = plain();
                if checked.as_deref() != Some(text.as_str()) {
                    self.stats.wrong.fetch_add(1, Ordering::Relaxed);
                    self.retire(&key);
                    return checked;
                }
            }
            self.stats.replayed.fetch_add(1, Ordering::Relaxed);
            return Some(text);
        }
        let text = plain()?;
        if known >= TRACES_PER_SHAPE {
            return Some(text);
        }
        let (recorded, guards) = recording(messages, record);
        match recorded {
            Some((recorded, _)) if recorded != text => {
                self.stats.wrong.fetch_add(1, Ordering::Relaxed);
                self.retire(&key);
            }
            Some((_, pieces)) => {
                let trace = Arc::new(Trace {
                    program: Program::new(&guards, &pieces),
                    checks_left: AtomicU32::new(CHECKED_REPLAYS),
                });
                // The trace must give back what it was made from.
                if trace.replay(&contents(messages)).as_deref() != Some(text.as_str()) {
                    self.stats.wrong.fetch_add(1, Ordering::Relaxed);
                    self.retire(&key);
                } else if let Ok(mut shapes) = self.shapes.write() {
                    self.stats.recorded.fetch_add(1, Ordering::Relaxed);
                    match shapes.get_mut(key.as_slice()) {
                        Some(Shape::Traced(traces)) if traces.len() < TRACES_PER_SHAPE => {
                            traces.push(trace)
                        }
                        Some(shape @ Shape::Seen) => *shape = Shape::Traced(vec![trace]),
                        Some(_) => {}
                        None => {
                            make_room(&mut shapes);
                            shapes.insert(key.into_boxed_slice(), Shape::Traced(vec![trace]));
                        }
                    }
                }
            }
            // A course the recording cannot follow, where no other is known: never again.
            _ if known == 0 => self.retire(&key),
            _ => {}
        }
        Some(text)
    }

    pub fn stats(&self) -> TraceStats {
        TraceStats {
            replayed: self.stats.replayed.load(Ordering::Relaxed),
            recorded: self.stats.recorded.load(Ordering::Relaxed),
            wrong: self.stats.wrong.load(Ordering::Relaxed),
        }
    }

    fn retire(&self, key: &[u8]) {
        if let Ok(mut shapes) = self.shapes.write() {
            if !shapes.contains_key(key) {
                make_room(&mut shapes);
            }
            shapes.insert(key.into(), Shape::Retired);
        }
    }
}

/// A table of shapes that is full starts over: the shapes a dataset holds now (or the clock's
/// second now) are kept, the ones it held before are let go.
fn make_room(shapes: &mut FxHashMap<Box<[u8]>, Shape>) {
    if shapes.len() >= SHAPES {
        shapes.clear();
    }
}

impl Trace {
    /// The trace's text for `slots`, where they meet its guards.
    fn replay(&self, slots: &[Option<&str>]) -> Option<String> {
        self.program.replay(slots)
    }
}

/// Everything a render reads but the contents: each message with its [`SLOT_FIELDS`] strings
/// marked rather than written, and the options, in [`write_tagged`]'s unambiguous bytes.
/// `None` where it would be too long.
fn shape_key(messages: &[Json], opts: &RenderOptions) -> Option<Vec<u8>> {
    let mut key: Vec<u8> = Vec::with_capacity(48 * messages.len() + 32);
    for message in messages {
        match message {
            Json::Object(map) => {
                key.push(b'{');
                write_len(map.len(), &mut key);
                for (k, v) in map {
                    write_str(k, &mut key);
                    match v {
                        // A tag no JSON value writes.
                        Json::String(_) if SLOT_FIELDS.contains(&k.as_str()) => key.push(1),
                        other => write_tagged(other, &mut key),
                    }
                }
            }
            other => write_tagged(other, &mut key),
        }
        if key.len() > MAX_KEY {
            return None;
        }
    }
    key.push(0);
    write_options(opts, &mut key);
    (key.len() <= MAX_KEY).then_some(key)
}
