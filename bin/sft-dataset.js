#!/usr/bin/env node
'use strict'

const { main } = require('./cli/main')

// A reader that stops early (`sft-dataset validate data.jsonl | head`) closes the pipe: what it
// wanted has been written, so the command ends there, quietly and with status 0.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e) => {
    if (e?.code !== 'EPIPE') throw e
    process.exit(0)
  })
}

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status
  },
  (e) => {
    // Anything reaching here is a bug in the CLI or the library, not bad input.
    process.stderr.write(`sft-dataset: internal error: ${e?.stack ?? e}\n`)
    process.exitCode = 3
  },
)
