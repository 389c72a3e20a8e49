'use strict'
// A progress bar on stderr, drawn only on a terminal so piped and captured output stays clean.

function progressBar(label, total, { stream = process.stderr, enabled = stream.isTTY === true } = {}) {
  let last = -1
  const draw = (done) => {
    const width = 30
    const filled = total > 0 ? Math.round((width * done) / total) : width
    stream.write(`\r${label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`)
  }
  return {
    enabled,
    update(done) {
      if (!enabled) return
      // Redrawing more than a few hundred times is pure overhead on large files.
      const step = Math.floor((200 * done) / Math.max(1, total))
      if (step === last && done !== total) return
      last = step
      draw(done)
    },
    /** A one-off status line for phases that report no progress (loading the file). */
    status(text) {
      if (enabled) stream.write(`\r\x1b[2K${text}`)
    },
    done() {
      if (enabled) stream.write('\r\x1b[2K')
    },
  }
}

module.exports = { progressBar }
