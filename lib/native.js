'use strict'
// The generated binding with every function and method guarded (see arguments.js); the rest of
// lib/ reaches the native code through this module only.

const { guardArguments } = require('./arguments.js')

module.exports = guardArguments(require('../index.js'))
