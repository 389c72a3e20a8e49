#!/usr/bin/env node
'use strict'

const { main } = require('./cli/main')

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
