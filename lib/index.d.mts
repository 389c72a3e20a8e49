// Typings of the ESM entry (index.mjs): the same names as the CommonJS entry, plus the whole
// API as the default export.
import * as api from './index.js'

export * from './index.js'
export default api
