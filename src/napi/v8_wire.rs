//! Examples handed over from JS as V8's serializer writes them (`v8.serialize`, format version
//! 15), read back as the JSON values the napi walk (`napi::json`) would make of the same objects.
//!
//! `createSFTDataset` converted its array of examples from JS objects on the JS thread. Reading
//! each object through napi costs about three napi calls a property and an array of property
//! names an object; V8's serializer writes the whole array in one pass of native code, several
//! times faster. This module then reads the bytes in two steps: [`skim`], on the JS thread, goes
//! through them once without building anything, to find each element's bytes and whether it can
//! be read from them; [`WireExamples::decode`] builds an element's JSON where its row is built,
//! on any thread.
//!
//! The two readings must give the same JSON, so this reader only answers where it is sure:
//! - an element whose value the walk would refuse or might read differently (a number JSON
//!   cannot hold, `undefined` or a hole in an array, a `BigInt` beyond 128 bits, more than
//!   `MAX_NODES` values, a reference to an object being read, that is a cycle) is handed back
//!   to the walk, which then gives its own value or its own error;
//! - anything else the serializer can write (dates, boxed primitives, maps, sets, typed arrays,
//!   regular expressions, errors, nesting past `MAX_DEPTH`) stops the reader: that element and
//!   every later one go through the walk.
//!
//! What the serializer reads matches the walk's reading of an ordinary object: own enumerable
//! string-keyed properties, integer keys first in ascending order, then the others in the order
//! they were created; accessors are called; `undefined`-valued properties are left out. A
//! shared object is read in full at each place it appears, as the walk does.

use serde_json::{Map, Value as Json};

use crate::example::json_value::{from_js_bigint, from_js_number};

/// The walk's limits: objects and arrays nested deeper are refused, and one example may expand
/// to at most this many values (a shared object counts once per reference).
pub const MAX_DEPTH: usize = 128;
pub const MAX_NODES: usize = 1_000_000;

/// The only version of the format this reader knows (V8 10 to 13, Node 18 to 24).
const VERSION: u32 = 15;

mod tag {
    pub const VERSION: u8 = 0xFF;
    pub const PADDING: u8 = 0x00;
    pub const NULL: u8 = b'0';
    pub const UNDEFINED: u8 = b'_';
    pub const TRUE: u8 = b'T';
    pub const FALSE: u8 = b'F';
    pub const INT32: u8 = b'I';
    pub const DOUBLE: u8 = b'N';
    pub const BIGINT: u8 = b'Z';
    pub const ONE_BYTE_STRING: u8 = b'"';
    pub const TWO_BYTE_STRING: u8 = b'c';
    pub const OBJECT_REFERENCE: u8 = b'^';
    pub const BEGIN_OBJECT: u8 = b'o';
    pub const END_OBJECT: u8 = b'{';
    pub const BEGIN_DENSE_ARRAY: u8 = b'A';
    pub const END_DENSE_ARRAY: u8 = b'$';
    pub const BEGIN_SPARSE_ARRAY: u8 = b'a';
    pub const END_SPARSE_ARRAY: u8 = b'@';
    pub const THE_HOLE: u8 = b'-';
}

/// How the skim found one element of the array.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Skimmed {
    /// Its JSON is to be decoded from the bytes.
    Wire(WireExample),
    /// The walk must read this element (it gives its value or refuses it).
    Walk,
}

/// Where an element's bytes are, and which of the keys that tell an example's format it has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WireExample {
    start: usize,
    end: usize,
    keys: u8,
}

/// The keys `example::detect_format` looks at, as bits of `WireExample::keys`.
const FORMAT_KEYS: [&str; 3] = ["prompt", "completion", "messages"];

impl WireExample {
    /// Whether the element is an object with own property `key` (one of the keys that tell an
    /// example's format) whose value is not `undefined`.
    pub fn has_key(&self, key: &str) -> bool {
        FORMAT_KEYS
            .iter()
            .position(|k| *k == key)
            .is_some_and(|bit| self.keys & (1 << bit) != 0)
    }
}

/// The serialized array and what the skim learned of the objects in it, for decoding elements on
/// any thread.
pub struct WireExamples {
    bytes: Vec<u8>,
    receivers: Vec<Receiver>,
}

/// What [`skim`] found: one entry per element up to the first one it could not get past (the
/// walk reads that one and every later one), and the bytes to decode the others from.
pub struct Skim {
    pub len: u32,
    pub elements: Vec<Skimmed>,
    pub examples: WireExamples,
}

/// Skims `bytes`, the serialization of a JS array; `None` if it is anything else or comes from
/// another version of the format.
///
/// V8 writes an array whose elements kind is holey in the sparse form (each element after its
/// index) even when no element is missing, and which kind an array has is V8's choice: an array
/// that `Array.prototype.slice` returns may be either once the function is optimized. In that
/// form each element must follow its own index; at the first that does not (a hole, or a named
/// property), the skim stops.
pub fn skim(bytes: &[u8]) -> Option<Skim> {
    let mut reader = Reader::new(bytes, Receivers::Growing(Vec::new()), false);
    if reader.byte().ok()? != tag::VERSION || reader.varint32().ok()? != VERSION {
        return None;
    }
    let sparse = match reader.tag().ok()? {
        tag::BEGIN_DENSE_ARRAY => false,
        tag::BEGIN_SPARSE_ARRAY => true,
        _ => return None,
    };
    reader.receivers.push(Receiver::Reading);
    let len = reader.varint32().ok()?;
    let mut elements = Vec::with_capacity((len as usize).min(bytes.len()));
    for index in 0..len {
        if sparse
            && !(reader.tag().ok() == Some(tag::INT32)
                && reader.int32().ok().and_then(|i| u32::try_from(i).ok()) == Some(index))
        {
            break;
        }
        reader.nodes_left = MAX_NODES;
        reader.walk = false;
        reader.keys = 0;
        let start = reader.pos;
        if reader.element().is_err() {
            break;
        }
        elements.push(if reader.walk {
            Skimmed::Walk
        } else {
            Skimmed::Wire(WireExample {
                start,
                end: reader.pos,
                keys: reader.keys,
            })
        });
    }
    let receivers = match reader.receivers {
        Receivers::Growing(receivers) => receivers,
        Receivers::Fixed(_) => return None,
    };
    Some(Skim {
        len,
        elements,
        examples: WireExamples {
            bytes: bytes.to_vec(),
            receivers,
        },
    })
}

impl WireExamples {
    /// The JSON of an element the skim found readable: what the walk reads from the same value.
    /// `None` only if the bytes say otherwise than they did to the skim, which is a bug.
    pub fn decode(&self, example: &WireExample) -> Option<Json> {
        let mut reader = Reader::new(&self.bytes, Receivers::Fixed(&self.receivers), true);
        reader.pos = example.start;
        // The skim numbered every object already.
        reader.replaying = 1;
        let json = reader.element().ok()?;
        (!reader.walk && reader.pos == example.end).then_some(json)
    }
}

/// Latin-1 bytes as UTF-8 text, written byte by byte rather than char by char; `None` only if
/// the result were not UTF-8, which would be a bug (the reader then stops and the walk reads
/// the value).
fn latin1_text(bytes: &[u8]) -> Option<String> {
    if bytes.is_ascii() {
        return String::from_utf8(bytes.to_vec()).ok();
    }
    let wide = bytes.iter().filter(|&&b| b >= 0x80).count();
    let mut out = Vec::with_capacity(bytes.len() + wide);
    for &b in bytes {
        if b < 0x80 {
            out.push(b);
        } else {
            out.extend_from_slice(&[0xC0 | (b >> 6), 0x80 | (b & 0x3F)]);
        }
    }
    String::from_utf8(out).ok()
}

/// UTF-16LE bytes (an even count) as UTF-8 text, each lone surrogate replaced by U+FFFD, as
/// napi writes them; ASCII units are copied without going through `char`. `None` only if the
/// result were not UTF-8, which would be a bug.
fn utf16_text(bytes: &[u8]) -> Option<String> {
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .collect();
    let mut out = Vec::with_capacity(units.len() + units.len() / 2);
    let mut rest = &units[..];
    while let Some((&unit, after)) = rest.split_first() {
        if unit < 0x80 {
            out.push(unit as u8);
            rest = after;
            continue;
        }
        // Anything else goes through the standard decoder up to the next ASCII unit.
        let run = rest.iter().position(|&u| u < 0x80).unwrap_or(rest.len());
        let mut buffer = [0u8; 4];
        for c in char::decode_utf16(rest[..run].iter().copied()) {
            let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
            out.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
        }
        rest = &rest[run..];
    }
    String::from_utf8(out).ok()
}

/// The reader cannot go on: the bytes hold something it does not read.
#[derive(Debug)]
struct Stop;

#[derive(Debug, Clone, Copy)]
enum Receiver {
    Reading,
    /// Its bytes, to be read again where a later reference points to it.
    Read {
        start: usize,
        end: usize,
    },
    /// Read while a reference to one of its ancestors was found: part of a cycle.
    Cyclic,
}

/// Every object and array met, by the id the serializer gave it (the order in which it began):
/// being numbered by the skim, or fixed for decoding.
enum Receivers<'a> {
    Growing(Vec<Receiver>),
    Fixed(&'a [Receiver]),
}

impl Receivers<'_> {
    fn get(&self, id: usize) -> Option<Receiver> {
        match self {
            Receivers::Growing(all) => all.get(id).copied(),
            Receivers::Fixed(all) => all.get(id).copied(),
        }
    }

    fn push(&mut self, receiver: Receiver) -> Option<usize> {
        match self {
            Receivers::Growing(all) => {
                all.push(receiver);
                Some(all.len() - 1)
            }
            Receivers::Fixed(_) => None,
        }
    }

    fn set(&mut self, id: usize, receiver: Receiver) {
        if let Receivers::Growing(all) = self {
            if let Some(slot) = all.get_mut(id) {
                *slot = receiver;
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    receivers: Receivers<'a>,
    /// Ids of the receivers being read, outermost first.
    open: Vec<usize>,
    /// Reading a referenced object again: its receivers have their ids already.
    replaying: usize,
    nodes_left: usize,
    /// The element goes to the walk.
    walk: bool,
    /// Build the JSON (decoding), or only go through the bytes (skimming).
    build: bool,
    /// The format keys of the element, when skimming.
    keys: u8,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], receivers: Receivers<'a>, build: bool) -> Self {
        Reader {
            bytes,
            pos: 0,
            receivers,
            open: Vec::new(),
            replaying: 0,
            nodes_left: MAX_NODES,
            walk: false,
            build,
            keys: 0,
        }
    }

    /// A top-level element: a value the walk reads at depth 0, where `undefined` and a hole are
    /// its to refuse.
    fn element(&mut self) -> Result<Json, Stop> {
        let t = self.tag()?;
        if t == tag::UNDEFINED || t == tag::THE_HOLE {
            self.walk = true;
            return Ok(Json::Null);
        }
        self.value_of(t, 0)
    }

    fn byte(&mut self) -> Result<u8, Stop> {
        let b = *self.bytes.get(self.pos).ok_or(Stop)?;
        self.pos += 1;
        Ok(b)
    }

    /// The next tag, padding skipped.
    fn tag(&mut self) -> Result<u8, Stop> {
        loop {
            let t = self.byte()?;
            if t != tag::PADDING {
                return Ok(t);
            }
        }
    }

    fn varint(&mut self, max_bytes: usize) -> Result<u64, Stop> {
        let mut value = 0u64;
        for k in 0..max_bytes {
            let b = self.byte()?;
            value |= u64::from(b & 0x7F) << (7 * k);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Stop)
    }

    fn varint32(&mut self) -> Result<u32, Stop> {
        u32::try_from(self.varint(5)?).map_err(|_| Stop)
    }

    fn length(&mut self) -> Result<usize, Stop> {
        let n = usize::try_from(self.varint(10)?).map_err(|_| Stop)?;
        if n > self.bytes.len() - self.pos {
            return Err(Stop);
        }
        Ok(n)
    }

    fn raw(&mut self, n: usize) -> Result<&[u8], Stop> {
        let end = self.pos.checked_add(n).ok_or(Stop)?;
        let slice = self.bytes.get(self.pos..end).ok_or(Stop)?;
        self.pos = end;
        Ok(slice)
    }

    fn int32(&mut self) -> Result<i32, Stop> {
        let zigzag = self.varint32()?;
        Ok(((zigzag >> 1) as i32) ^ -((zigzag & 1) as i32))
    }

    fn double(&mut self) -> Result<f64, Stop> {
        let raw = self.raw(8)?;
        let mut le = [0u8; 8];
        le.copy_from_slice(raw);
        Ok(f64::from_le_bytes(le))
    }

    /// A string's text as napi writes it: Latin-1 as UTF-8, UTF-16 with each lone surrogate
    /// replaced by U+FFFD. Without `keep`, only its bytes are passed (an empty string returned).
    fn string_of(&mut self, t: u8, keep: bool) -> Result<String, Stop> {
        match t {
            tag::ONE_BYTE_STRING => {
                let n = self.length()?;
                let bytes = self.raw(n)?;
                if !keep {
                    return Ok(String::new());
                }
                latin1_text(bytes).ok_or(Stop)
            }
            tag::TWO_BYTE_STRING => {
                let n = self.length()?;
                if n % 2 != 0 {
                    return Err(Stop);
                }
                let bytes = self.raw(n)?;
                if !keep {
                    return Ok(String::new());
                }
                utf16_text(bytes).ok_or(Stop)
            }
            _ => Err(Stop),
        }
    }

    /// A property key: a string, or an integer index the serializer wrote as a number. Without
    /// `keep`, only checked and passed.
    fn key_of(&mut self, t: u8, keep: bool) -> Result<String, Stop> {
        match t {
            tag::INT32 => {
                let n = self.int32()?;
                Ok(if keep { n.to_string() } else { String::new() })
            }
            tag::DOUBLE => {
                let n = self.double()?;
                if n.fract() != 0.0 || !(0.0..4_294_967_296.0).contains(&n) {
                    return Err(Stop);
                }
                Ok(if keep {
                    (n as u64).to_string()
                } else {
                    String::new()
                })
            }
            _ => self.string_of(t, keep),
        }
    }

    /// Counts one value against the example's budget, as the walk does.
    fn count(&mut self) {
        if self.nodes_left == 0 {
            self.walk = true;
        } else {
            self.nodes_left -= 1;
        }
    }

    /// The value that begins with tag `t`, at `depth` (0 for an element itself).
    fn value_of(&mut self, t: u8, depth: usize) -> Result<Json, Stop> {
        self.count();
        Ok(match t {
            tag::NULL => Json::Null,
            tag::TRUE => Json::Bool(true),
            tag::FALSE => Json::Bool(false),
            tag::INT32 => {
                let n = self.int32()?;
                from_js_number(f64::from(n)).ok_or(Stop)?
            }
            tag::DOUBLE => {
                let n = self.double()?;
                from_js_number(n).unwrap_or_else(|| {
                    self.walk = true;
                    Json::Null
                })
            }
            tag::BIGINT => self.bigint()?,
            tag::ONE_BYTE_STRING | tag::TWO_BYTE_STRING => {
                Json::String(self.string_of(t, self.build)?)
            }
            tag::BEGIN_OBJECT | tag::BEGIN_DENSE_ARRAY | tag::BEGIN_SPARSE_ARRAY => {
                self.receiver(t, depth)?
            }
            tag::OBJECT_REFERENCE => self.reference(depth)?,
            // `undefined` and holes inside arrays are the walk's to refuse.
            tag::UNDEFINED | tag::THE_HOLE => {
                self.walk = true;
                Json::Null
            }
            _ => return Err(Stop),
        })
    }

    /// A `BigInt`: a bitfield (sign in bit 0, byte length above it), then 64-bit digits, least
    /// significant first.
    fn bigint(&mut self) -> Result<Json, Stop> {
        let bitfield = self.varint(10)?;
        let negative = bitfield & 1 == 1;
        let n = usize::try_from(bitfield >> 1).map_err(|_| Stop)?;
        if n % 8 != 0 || n > self.bytes.len() - self.pos {
            return Err(Stop);
        }
        let words: Vec<u64> = self
            .raw(n)?
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
            .collect();
        Ok(from_js_bigint(negative, &words).unwrap_or_else(|| {
            self.walk = true;
            Json::Null
        }))
    }

    /// An object or array, which the serializer numbers in the order they begin.
    fn receiver(&mut self, t: u8, depth: usize) -> Result<Json, Stop> {
        // The walk refuses nesting this deep; the reader stops rather than follow it further.
        if depth >= MAX_DEPTH {
            return Err(Stop);
        }
        let id = if self.replaying == 0 {
            let id = self.receivers.push(Receiver::Reading);
            self.open.extend(id);
            id
        } else {
            None
        };
        let start = self.pos - 1;
        let json = match t {
            tag::BEGIN_OBJECT => self.object(depth)?,
            tag::BEGIN_DENSE_ARRAY => self.dense_array(depth)?,
            _ => self.sparse_array(depth)?,
        };
        if let Some(id) = id {
            self.open.pop();
            if let Some(Receiver::Reading) = self.receivers.get(id) {
                self.receivers.set(
                    id,
                    Receiver::Read {
                        start,
                        end: self.pos,
                    },
                );
            }
        }
        Ok(json)
    }

    fn object(&mut self, depth: usize) -> Result<Json, Stop> {
        let mut map = Map::new();
        let mut properties = 0u64;
        loop {
            let t = self.tag()?;
            if t == tag::END_OBJECT {
                if self.varint(10)? != properties {
                    return Err(Stop);
                }
                return Ok(Json::Object(map));
            }
            // The skim reads the keys of an element itself, for its format.
            let key = self.key_of(t, self.build || depth == 0)?;
            properties += 1;
            let t = self.tag()?;
            // `undefined` properties are left out, as the walk (and JSON.stringify) does.
            if t == tag::UNDEFINED {
                continue;
            }
            if depth == 0 {
                if let Some(bit) = FORMAT_KEYS.iter().position(|k| *k == key) {
                    self.keys |= 1 << bit;
                }
            }
            let value = self.value_of(t, depth + 1)?;
            if self.build {
                map.insert(key, value);
            }
        }
    }

    /// Named properties of an array (the walk reads elements only), read to get past them.
    fn skip_properties(&mut self, end: u8, depth: usize) -> Result<u64, Stop> {
        let walk = self.walk;
        let nodes_left = self.nodes_left;
        let mut properties = 0u64;
        loop {
            let t = self.tag()?;
            if t == end {
                break;
            }
            self.key_of(t, false)?;
            let t = self.tag()?;
            self.value_of(t, depth + 1)?;
            properties += 1;
        }
        self.walk = walk;
        self.nodes_left = nodes_left;
        Ok(properties)
    }

    fn dense_array(&mut self, depth: usize) -> Result<Json, Stop> {
        let len = self.varint32()?;
        let mut items = Vec::new();
        if self.build {
            items.reserve((len as usize).min(self.bytes.len() - self.pos));
        }
        for _ in 0..len {
            let t = self.tag()?;
            let value = self.value_of(t, depth + 1)?;
            if self.build {
                items.push(value);
            }
        }
        let named = self.skip_properties(tag::END_DENSE_ARRAY, depth)?;
        if self.varint(10)? != named || self.varint32()? != len {
            return Err(Stop);
        }
        Ok(Json::Array(items))
    }

    /// An array with holes or dictionary elements: index/value pairs. Unless every index below
    /// its length has a value, the walk reads it (a hole may find a value on the prototype).
    fn sparse_array(&mut self, depth: usize) -> Result<Json, Stop> {
        let len = self.varint32()?;
        let mut items = Vec::new();
        if self.build {
            items.reserve((len as usize).min(self.bytes.len() - self.pos));
        }
        let mut elements = 0usize;
        let mut properties = 0u64;
        loop {
            let t = self.tag()?;
            if t == tag::END_SPARSE_ARRAY {
                break;
            }
            properties += 1;
            let index = match t {
                tag::INT32 => u32::try_from(self.int32()?).ok(),
                tag::DOUBLE => {
                    let n = self.double()?;
                    (n.fract() == 0.0 && (0.0..f64::from(u32::MAX)).contains(&n))
                        .then_some(n as u32)
                }
                _ => {
                    self.string_of(t, false)?;
                    None
                }
            };
            match index {
                Some(i) if i < len => {
                    if i as usize != elements {
                        self.walk = true;
                    }
                    elements += 1;
                    let t = self.tag()?;
                    let value = self.value_of(t, depth + 1)?;
                    if self.build {
                        items.push(value);
                    }
                }
                _ => {
                    // A named property, or an index the array's length does not cover.
                    let walk = self.walk;
                    let nodes_left = self.nodes_left;
                    let t = self.tag()?;
                    self.value_of(t, depth + 1)?;
                    self.walk = walk;
                    self.nodes_left = nodes_left;
                }
            }
        }
        if self.varint(10)? != properties || self.varint32()? != len {
            return Err(Stop);
        }
        if elements != len as usize {
            self.walk = true;
        }
        Ok(Json::Array(items))
    }

    /// A reference to an object met before: read again from its bytes, unless it is still
    /// being read (a cycle, which the walk refuses at its depth limit).
    fn reference(&mut self, depth: usize) -> Result<Json, Stop> {
        let id = usize::try_from(self.varint(10)?).map_err(|_| Stop)?;
        let (start, end) = match self.receivers.get(id).ok_or(Stop)? {
            Receiver::Read { start, end } => (start, end),
            Receiver::Reading => {
                for &open in &self.open {
                    self.receivers.set(open, Receiver::Cyclic);
                }
                self.walk = true;
                return Ok(Json::Null);
            }
            Receiver::Cyclic => {
                self.walk = true;
                return Ok(Json::Null);
            }
        };
        if self.walk {
            // The element goes to the walk anyway: no need to expand what it shares.
            return Ok(Json::Null);
        }
        // The value counted itself as one node already; its bytes count it again.
        self.nodes_left += 1;
        let resume = self.pos;
        self.pos = start;
        self.replaying += 1;
        let t = self.tag();
        let json = t.and_then(|t| self.value_of(t, depth));
        self.replaying -= 1;
        let read_to = self.pos;
        self.pos = resume;
        let json = json?;
        if read_to != end {
            return Err(Stop);
        }
        Ok(json)
    }
}

#[cfg(test)]
mod tests;
