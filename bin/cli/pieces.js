'use strict'
// Readable text for a single token. Decoding one id at a time splits multi-byte characters
// (CJK, emoji) across tokens; those pieces are shown as their raw bytes instead of U+FFFD.

const REPLACEMENT = '\uFFFD'

// Byte-level BPE vocabularies (GPT-2, Qwen, Llama 3) spell every byte as one printable code
// point: printable Latin-1 bytes as themselves, the others shifted to U+0100 onwards.
function byteLevelAlphabet() {
  const toByte = new Map()
  let shifted = 0
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
    toByte.set(String.fromCodePoint(printable ? b : 256 + shifted++), b)
  }
  return toByte
}

const BYTE_OF = byteLevelAlphabet()

function hexBytes(bytes) {
  return '<' + bytes.map((b) => b.toString(16).padStart(2, '0')).join(' ') + '>'
}

/** Bytes of a byte-level vocabulary entry, or null when `raw` is not spelled that way. */
function byteLevelBytes(raw) {
  const bytes = []
  for (const ch of raw) {
    const b = BYTE_OF.get(ch)
    if (b === undefined) return null
    bytes.push(b)
  }
  return bytes
}

/** Text for a token whose own decoding is an incomplete character. */
function fallbackText(raw) {
  // SentencePiece byte tokens are already spelled as bytes; some look like byte-level text.
  if (/^<0x[0-9A-Fa-f]{2}>$/.test(raw)) return raw
  const bytes = byteLevelBytes(raw)
  return bytes ? hexBytes(bytes) : raw
}

/**
 * A memoised describer of token ids: `{text, special}` where `special` says the tokenizer
 * drops the token with `skipSpecialTokens` (added control tokens such as `<|im_end|>`).
 */
function pieceDescriber(tokenizer) {
  const cache = new Map()
  return (id) => {
    let piece = cache.get(id)
    if (piece) return piece
    const ids = Uint32Array.of(id)
    let text = tokenizer.decodeSync(ids, false)
    const special = text !== '' && tokenizer.decodeSync(ids, true) === ''
    if (text.includes(REPLACEMENT)) {
      text = fallbackText(tokenizer.idToToken(id) ?? '')
    }
    piece = { text, special }
    cache.set(id, piece)
    return piece
  }
}

module.exports = { pieceDescriber, fallbackText }
