//! A jinja2 filter's Python signature: its arguments bound to its parameters by position or by
//! name, with the `TypeError`s Python raises for a call that does not fit (`do_wordwrap() got an
//! unexpected keyword argument 'x'`, `... takes from 2 to 6 positional arguments but 7 were
//! given`). jinja2 passes a filter marked `pass_environment` or `pass_eval_context` one more
//! argument first, which Python counts.

use minijinja::value::{Kwargs, Value};
use minijinja::Error;

use super::python_semantics::type_error;

/// A filter function as Python declares it.
pub struct Signature {
    /// The function's name (`do_wordwrap`).
    pub function: &'static str,
    /// Every parameter, those jinja2 passes first included.
    pub params: &'static [&'static str],
    /// How many of `params` jinja2 passes itself.
    pub passed: usize,
    /// How many of `params` have no default.
    pub required: usize,
}

impl Signature {
    /// The value of each parameter after those jinja2 passes, where given: `value` first, then
    /// `args`, then `kwargs` by name. Python checks the names before the count.
    pub fn bind(
        &self,
        value: Value,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Result<Vec<Option<Value>>, Error> {
        let given = self.passed + 1 + args.len();
        let mut bound: Vec<Option<Value>> = std::iter::once(Some(value))
            .chain(args.iter().cloned().map(Some))
            .chain(std::iter::repeat(None))
            .take(self.params.len().max(given) - self.passed)
            .collect();
        for name in kwargs.args() {
            let Some(at) = self.params.iter().position(|p| *p == name) else {
                return Err(type_error(format!(
                    "{}() got an unexpected keyword argument '{name}'",
                    self.function
                )));
            };
            if at < given {
                return Err(type_error(format!(
                    "{}() got multiple values for argument '{name}'",
                    self.function
                )));
            }
            bound[at - self.passed] = Some(kwargs.get(name)?);
        }
        if given > self.params.len() {
            let total = self.params.len();
            let takes = if total == self.required {
                format!(
                    "{total} positional argument{}",
                    if total == 1 { "" } else { "s" }
                )
            } else {
                format!("from {} to {total} positional arguments", self.required)
            };
            return Err(type_error(format!(
                "{}() takes {takes} but {given} were given",
                self.function
            )));
        }
        Ok(bound)
    }
}
