'use strict'
// attachDistillation: the reference's self-distillation step around the caller's async fetch.
// The decisions (which groups are fetched, each request, whether the replies line up) are native
// (src/distill.rs); only the concurrency lives here, because the fetch is the caller's JS.

const native = require('./native.js')

function dropPayload(group) {
  group.distill_token_ids = null
  group.distill_logprobs = null
  return group
}

async function attachDistillation(group, fetchLogprobs, config) {
  const plan = native.planDistillationRequests(
    group.tokens ?? null,
    group.overrides ?? null,
    group.group_overrides ?? null,
    config ?? null,
  )
  if (plan.action === 'unchanged') return group
  if (plan.action === 'drop') return dropPayload(group)
  // Every fetch starts before any is awaited; a synchronous throw counts as a rejection.
  const settled = await Promise.allSettled(
    plan.requests.map((request) => new Promise((resolve) => resolve(fetchLogprobs(request)))),
  )
  const warning = native.checkDistillationReplies(group.tokens, settled)
  if (warning != null) {
    const onWarning = config?.onWarning ?? console.warn
    onWarning(warning)
    return dropPayload(group)
  }
  group.distill_token_ids = settled.map((s) => s.value.prompt_topk_token_ids)
  group.distill_logprobs = settled.map((s) => s.value.prompt_topk_logprobs)
  return group
}

module.exports = { attachDistillation }
