//! Work that runs on libuv's thread pool and settles a Promise: the one way every async export
//! leaves the JS thread.

use napi::bindgen_prelude::{ToNapiValue, TypeName};
use napi::{Env, Task};

use super::error::{guard, rejection};
use crate::error::{ErrorCode, SftError, SftResult};

type Work<T> = Box<dyn FnOnce() -> SftResult<T> + Send>;
type Finish<T, J> = fn(&Env, T) -> SftResult<J>;

pub struct Job<T: Send + 'static, J> {
    work: Option<Work<T>>,
    finish: Finish<T, J>,
    failure: Option<SftError>,
}

impl<T: Send + 'static, J> Job<T, J> {
    /// `work` runs off the JS thread; `finish` turns its output into JS values on the JS thread.
    pub fn new(work: impl FnOnce() -> SftResult<T> + Send + 'static, finish: Finish<T, J>) -> Self {
        Job {
            work: Some(Box::new(work)),
            finish,
            failure: None,
        }
    }
}

/// A job whose output crosses to JS unchanged.
pub fn job<T: Send + 'static>(work: impl FnOnce() -> SftResult<T> + Send + 'static) -> Job<T, T> {
    Job::new(work, |_, v| Ok(v))
}

impl<T: Send + 'static, J: ToNapiValue + TypeName> Task for Job<T, J> {
    type Output = T;
    type JsValue = J;

    fn compute(&mut self) -> napi::Result<T> {
        let outcome = match self.work.take() {
            Some(work) => guard(work),
            None => Err(SftError::new(ErrorCode::Internal, "job ran twice")),
        };
        outcome.map_err(|e| {
            self.failure = Some(e);
            napi::Error::from_status(napi::Status::GenericFailure)
        })
    }

    fn resolve(&mut self, env: Env, output: T) -> napi::Result<J> {
        let finish = self.finish;
        guard(move || finish(&env, output)).map_err(|e| rejection(&env, e))
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<J> {
        let failure = self
            .failure
            .take()
            .unwrap_or_else(|| SftError::new(ErrorCode::Internal, err.reason.clone()));
        Err(rejection(&env, failure))
    }
}
