//! JS values as JSON: the one conversion of messages, tools, template arguments and created
//! examples, so that numbers reach the template as `json_value` says (napi's own conversion makes
//! every integer beyond 32 bits a float and a `BigInt` beyond 64 bits a string).

use napi::bindgen_prelude::{Array, BigInt, FromNapiValue, ToNapiValue, TypeName, Unknown};
use napi::{sys, JsValue, Status, ValueType};
use serde_json::{Map, Value as Json};

use crate::example::json_value::{from_js_bigint, from_js_number};

/// A JS value converted to JSON. Takes the place of `serde_json::Value` in exported signatures
/// (with `ts_type`/`ts_arg_type` keeping `any` in `index.d.ts`).
pub struct JsJson(pub Json);

impl JsJson {
    pub fn list(values: Vec<JsJson>) -> Vec<Json> {
        values.into_iter().map(|v| v.0).collect()
    }
}

// As napi's conversion: deeper values are refused before they can exhaust the stack, and one
// value may expand to at most `MAX_NODES` nodes (a shared object counts once per reference).
// `napi::v8_wire` reads examples under the same limits.
use super::v8_wire::{MAX_DEPTH, MAX_NODES};

enum Step {
    Index(u32),
    Key(String),
}

struct Walk {
    env: sys::napi_env,
    nodes_left: usize,
    path: Vec<Step>,
}

impl Walk {
    /// Where the walk is, relative to the argument: `[1].tool_calls[0].function`.
    fn at(&self) -> String {
        if self.path.is_empty() {
            return "the value".to_string();
        }
        let mut out = String::new();
        for step in &self.path {
            match step {
                Step::Index(i) => out.push_str(&format!("[{i}]")),
                Step::Key(k) if !out.is_empty() => out.push_str(&format!(".{k}")),
                Step::Key(k) => out.push_str(k),
            }
        }
        out
    }

    fn refuse(&self, what: &str) -> napi::Error {
        napi::Error::new(Status::InvalidArg, format!("{} is {what}", self.at()))
    }

    /// # Safety
    /// `raw` is a live value of the current call in `self.env`.
    unsafe fn value(&mut self, raw: sys::napi_value) -> napi::Result<Json> {
        let kind = unsafe { Unknown::from_napi_value(self.env, raw)? }.get_type()?;
        unsafe { self.value_of(raw, kind) }
    }

    /// `value` of a value whose type is known already.
    ///
    /// # Safety
    /// As `value`; `kind` is the type of `raw`.
    unsafe fn value_of(&mut self, raw: sys::napi_value, kind: ValueType) -> napi::Result<Json> {
        if self.nodes_left == 0 {
            return Err(napi::Error::new(
                Status::InvalidArg,
                "Exceeded maximum JSON value count".to_string(),
            ));
        }
        self.nodes_left -= 1;
        let env = self.env;
        let unknown = unsafe { Unknown::from_napi_value(env, raw)? };
        Ok(match kind {
            ValueType::Null => Json::Null,
            ValueType::Boolean => Json::Bool(unsafe { bool::from_napi_value(env, raw)? }),
            ValueType::String => Json::String(unsafe { js_string(env, raw)? }),
            ValueType::Number => {
                let n = unsafe { f64::from_napi_value(env, raw)? };
                match from_js_number(n) {
                    Some(json) => json,
                    None => {
                        return Err(self.refuse(&format!(
                            "{}, which JSON cannot hold: only finite numbers reach a chat template",
                            crate::error::js_number(n)
                        )))
                    }
                }
            }
            ValueType::BigInt => {
                let n = unsafe { BigInt::from_napi_value(env, raw)? };
                match from_js_bigint(n.sign_bit, &n.words) {
                    Some(json) => json,
                    None => {
                        return Err(self.refuse(
                            "a BigInt beyond 128 bits: a chat template holds integers from -2^127 to 2^128-1",
                        ))
                    }
                }
            }
            ValueType::Object => {
                if self.path.len() >= MAX_DEPTH {
                    return Err(napi::Error::new(
                        Status::InvalidArg,
                        "Exceeded maximum JSON nesting depth".to_string(),
                    ));
                }
                if unknown.is_array()? {
                    let array = unsafe { Array::from_napi_value(env, raw)? };
                    let mut items = Vec::with_capacity(array.len() as usize);
                    for i in 0..array.len() {
                        let item: Unknown = array.get(i)?.ok_or_else(|| self.refuse("missing"))?;
                        self.path.push(Step::Index(i));
                        items.push(unsafe { self.value(item.value().value)? });
                        self.path.pop();
                    }
                    Json::Array(items)
                } else {
                    // The keys `Object.keys` gives (own, enumerable, not symbols), as
                    // `JSON.stringify` and V8's serializer read them (`napi::v8_wire`), each
                    // read back with its own JS string: no key is made anew from Rust text.
                    let names = unsafe {
                        call(|out| {
                            sys::napi_get_all_property_names(
                                env,
                                raw,
                                sys::KeyCollectionMode::own_only,
                                sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
                                sys::KeyConversion::numbers_to_strings,
                                out,
                            )
                        })?
                    };
                    let names = unsafe { Array::from_napi_value(env, names)? };
                    let mut map = Map::with_capacity(names.len() as usize);
                    for i in 0..names.len() {
                        let key_value =
                            unsafe { call(|out| sys::napi_get_element(env, names.raw(), i, out))? };
                        let item = unsafe {
                            call(|out| sys::napi_get_property(env, raw, key_value, out))?
                        };
                        // `undefined` properties are left out, as JSON.stringify does.
                        let kind = unsafe { Unknown::from_napi_value(env, item)? }.get_type()?;
                        if kind == ValueType::Undefined {
                            continue;
                        }
                        let key = unsafe { js_string(env, key_value)? };
                        self.path.push(Step::Key(key));
                        let json = unsafe { self.value_of(item, kind)? };
                        if let Some(Step::Key(key)) = self.path.pop() {
                            map.insert(key, json);
                        }
                    }
                    Json::Object(map)
                }
            }
            ValueType::Undefined => return Err(self.refuse("undefined")),
            ValueType::Function => return Err(self.refuse("a function")),
            ValueType::Symbol => return Err(self.refuse("a symbol")),
            _ => return Err(self.refuse("not a JSON value")),
        })
    }
}

/// Strings whose UTF-8 text fits this buffer are read with one napi call; longer ones ask for
/// their length first.
const STRING_SCRATCH: usize = 16 * 1024;

/// The UTF-8 text of a JS string (lone surrogates become U+FFFD, as napi writes them).
///
/// # Safety
/// `raw` is a live string value of the current call in `env`.
unsafe fn js_string(env: sys::napi_env, raw: sys::napi_value) -> napi::Result<String> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> =
            std::cell::RefCell::new(Vec::with_capacity(STRING_SCRATCH));
    }
    let status = |status: sys::napi_status| {
        if status == sys::Status::napi_ok {
            Ok(())
        } else {
            Err(napi::Error::new(
                Status::from(status),
                "reading a JS string failed".to_string(),
            ))
        }
    };
    let not_utf8 = || napi::Error::new(Status::InvalidArg, "a JS string was not read as UTF-8");
    let short = SCRATCH.with(|scratch| -> napi::Result<Option<String>> {
        let mut scratch = scratch.borrow_mut();
        let capacity = scratch.capacity();
        let mut written = 0;
        // SAFETY: napi writes at most `capacity - 1` bytes and a NUL into the spare capacity,
        // and says how many bytes of text it wrote.
        status(unsafe {
            sys::napi_get_value_string_utf8(
                env,
                raw,
                scratch.as_mut_ptr().cast(),
                capacity,
                &mut written,
            )
        })?;
        // napi stops only before a character that does not fit, and none takes more than four
        // bytes: with four bytes or more to spare, the text is whole.
        if written + 4 < capacity {
            // SAFETY: the first `written` bytes were just written.
            unsafe { scratch.set_len(written) };
            let text = std::str::from_utf8(&scratch).map(str::to_owned);
            scratch.clear();
            return text.map(Some).map_err(|_| not_utf8());
        }
        Ok(None)
    })?;
    if let Some(text) = short {
        return Ok(text);
    }
    let mut len = 0;
    // SAFETY: a length query writes only `len`.
    status(unsafe {
        sys::napi_get_value_string_utf8(env, raw, std::ptr::null_mut(), 0, &mut len)
    })?;
    let mut bytes: Vec<u8> = Vec::with_capacity(len + 1);
    let mut written = 0;
    // SAFETY: napi writes at most `len` bytes and a NUL into the `len + 1` bytes of spare
    // capacity; `written` of them are text.
    unsafe {
        status(sys::napi_get_value_string_utf8(
            env,
            raw,
            bytes.as_mut_ptr().cast(),
            len + 1,
            &mut written,
        ))?;
        bytes.set_len(written);
    }
    String::from_utf8(bytes).map_err(|_| not_utf8())
}

/// One napi call that writes a value: its status checked, the value returned.
///
/// # Safety
/// `f` is a napi call that writes a value through its argument.
unsafe fn call(
    f: impl FnOnce(*mut sys::napi_value) -> sys::napi_status,
) -> napi::Result<sys::napi_value> {
    let mut out = std::ptr::null_mut();
    let status = f(&mut out);
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(
            Status::from(status),
            "reading a JS value failed".to_string(),
        ));
    }
    Ok(out)
}

impl FromNapiValue for JsJson {
    unsafe fn from_napi_value(env: sys::napi_env, raw: sys::napi_value) -> napi::Result<Self> {
        let mut walk = Walk {
            env,
            nodes_left: MAX_NODES,
            path: Vec::new(),
        };
        unsafe { walk.value(raw) }.map(JsJson)
    }
}

/// napi's `#[napi(object)]` structs convert both ways; options are only read, but a value written
/// back is plain JSON (a wide integer shows as its carrier object).
impl ToNapiValue for JsJson {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> napi::Result<sys::napi_value> {
        unsafe { Json::to_napi_value(env, value.0) }
    }
}

/// A plain object to napi's typing of async results (`Job`'s output).
impl TypeName for JsJson {
    fn type_name() -> &'static str {
        "object"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

/// V8's serializer (`v8.serialize`, found through `process.getBuiltinModule`, Node 20.16 and
/// later), for `napi::v8_wire` to read.
pub struct Serializer {
    env: sys::napi_env,
    module: sys::napi_value,
    serialize: sys::napi_value,
    /// `Array.prototype` and its `slice`.
    array_prototype: sys::napi_value,
    slice: sys::napi_value,
}

impl Serializer {
    /// The serializer, or `None` where there is no such function (the walk then reads every
    /// value itself).
    ///
    /// # Safety
    /// `env` is the env of the current call; the serializer is used within that call only.
    pub unsafe fn find(env: sys::napi_env) -> Option<Self> {
        let found = (|| {
            let named = |object: sys::napi_value, name: &std::ffi::CStr| unsafe {
                call(|out| sys::napi_get_named_property(env, object, name.as_ptr(), out)).ok()
            };
            let global = unsafe { call(|out| sys::napi_get_global(env, out)) }.ok()?;
            let process = named(global, c"process")?;
            let builtin = named(process, c"getBuiltinModule")?;
            let module = c"node:v8";
            let name =
                unsafe { call(|out| sys::napi_create_string_utf8(env, module.as_ptr(), 7, out)) }
                    .ok()?;
            let module = unsafe {
                call(|out| sys::napi_call_function(env, process, builtin, 1, &name, out))
            }
            .ok()?;
            let serialize = named(module, c"serialize")?;
            let array = named(global, c"Array")?;
            let array_prototype = named(array, c"prototype")?;
            let slice = named(array_prototype, c"slice")?;
            Some(Serializer {
                env,
                module,
                serialize,
                array_prototype,
                slice,
            })
        })();
        if found.is_none() {
            unsafe { clear_exception(env) };
        }
        found
    }

    /// `read` of the serialization of the elements `from..to` of `array` (`Serializer::copy`),
    /// in a handle scope of its own (the bytes are gone once `read` returns); `None` where the
    /// serializer refuses a value (a function, a symbol, a proxy, a getter that throws...), its
    /// exception cleared: the walk then reads those elements itself and says what is wrong.
    ///
    /// # Safety
    /// `array` is a live JS array of the current call.
    pub unsafe fn elements<T>(
        &self,
        array: sys::napi_value,
        from: u32,
        to: u32,
        read: impl FnOnce(&[u8]) -> Option<T>,
    ) -> Option<T> {
        let env = self.env;
        let mut scope = std::ptr::null_mut();
        // SAFETY: a handle scope opened here and closed below, on the JS thread.
        if unsafe { sys::napi_open_handle_scope(env, &mut scope) } != sys::Status::napi_ok {
            return None;
        }
        let serialized = (|| {
            let slice = unsafe { self.copy(array, from, to) }?;
            let buffer = unsafe {
                call(|out| {
                    sys::napi_call_function(env, self.module, self.serialize, 1, &slice, out)
                })
            }
            .ok()?;
            let mut data = std::ptr::null_mut();
            let mut len = 0;
            // SAFETY: napi writes the buffer's address and length, or fails on anything else.
            let status = unsafe { sys::napi_get_buffer_info(env, buffer, &mut data, &mut len) };
            if status != sys::Status::napi_ok || data.is_null() {
                return None;
            }
            // SAFETY: a Node buffer's bytes do not move or go away while a handle holds it, and
            // the scope holding it closes only after `read`.
            read(unsafe { std::slice::from_raw_parts(data.cast::<u8>().cast_const(), len) })
        })();
        if serialized.is_none() {
            unsafe { clear_exception(env) };
        }
        // SAFETY: the scope opened above; nothing made in it is used after this.
        unsafe { sys::napi_close_handle_scope(env, scope) };
        serialized
    }
}

impl Serializer {
    /// A new array of the elements `from..to` of `array`. For a plain array, `array.slice`: one
    /// call. Any other array (a subclass, an own `constructor`, a proxy) is copied element by
    /// element instead, as `slice` would call its constructor (`Symbol.species`), running code
    /// the walk never runs. V8 may
    /// write either copy in the sparse form, which `v8_wire::skim` reads.
    ///
    /// # Safety
    /// `array` is a live JS array of the current call, inside the caller's handle scope.
    unsafe fn copy(&self, array: sys::napi_value, from: u32, to: u32) -> Option<sys::napi_value> {
        let env = self.env;
        let mut prototype = std::ptr::null_mut();
        // SAFETY: reads the prototype of a live object; no user code runs.
        if unsafe { sys::napi_get_prototype(env, array, &mut prototype) } != sys::Status::napi_ok {
            return None;
        }
        let mut plain = false;
        // SAFETY: compares two live values.
        let status =
            unsafe { sys::napi_strict_equals(env, prototype, self.array_prototype, &mut plain) };
        if status != sys::Status::napi_ok {
            return None;
        }
        if plain {
            // An own `constructor` would stand in for the prototype's.
            let key = unsafe {
                call(|out| sys::napi_create_string_utf8(env, c"constructor".as_ptr(), 11, out))
            }
            .ok()?;
            // SAFETY: an own-property check of a live object; no user code runs on an array.
            let status = unsafe { sys::napi_has_own_property(env, array, key, &mut plain) };
            if status != sys::Status::napi_ok {
                return None;
            }
            plain = !plain;
        }
        if plain {
            let number = |n: u32| unsafe { call(|out| sys::napi_create_uint32(env, n, out)) };
            let bounds = [number(from).ok()?, number(to).ok()?];
            return unsafe {
                call(|out| sys::napi_call_function(env, array, self.slice, 2, bounds.as_ptr(), out))
            }
            .ok();
        }
        let copy = unsafe { call(|out| sys::napi_create_array(env, out)) }.ok()?;
        for (k, i) in (from..to).enumerate() {
            let element = unsafe { call(|out| sys::napi_get_element(env, array, i, out)) }.ok()?;
            // SAFETY: `copy` and `element` are live handles of the caller's scope.
            let status = unsafe { sys::napi_set_element(env, copy, k as u32, element) };
            if status != sys::Status::napi_ok {
                return None;
            }
        }
        Some(copy)
    }
}

/// Clears the env's pending exception, if there is one.
///
/// # Safety
/// `env` is the env of the current call.
unsafe fn clear_exception(env: sys::napi_env) {
    let mut pending = false;
    // SAFETY: both calls only read or clear the env's pending exception.
    unsafe {
        if sys::napi_is_exception_pending(env, &mut pending) == sys::Status::napi_ok && pending {
            let mut exception = std::ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut exception);
        }
    }
}
