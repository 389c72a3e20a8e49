//! Slices (`x[a:b:c]`) through Python's slicing (see `python_slice`).

use minijinja::machinery::ast;

use super::Walker;
use crate::render::python_slice::SLICE_FILTER;

impl Walker<'_> {
    /// `x[a:b:c]` becomes `((x)|__sft_py_slice(a, b, c))` (`none` for a bound not written):
    /// Python's slicing (see `python_slice`), parenthesized whole so that it stands as a test's
    /// argument too. A slice whose brackets are not found where expected keeps minijinja's.
    pub(super) fn slice(&mut self, s: &ast::Spanned<ast::Slice>) {
        self.expr(&s.expr);
        let parts = [&s.start, &s.stop, &s.step];
        for part in parts.into_iter().flatten() {
            self.expr(part);
        }
        let Some(edits) = self.slice_edits(s) else {
            return;
        };
        // Parenthesized whole: what follows (`[0]`, `.name`) applies to the slice.
        self.insert(self.start(&s.expr), "((".to_string());
        for (start, end, text) in edits {
            self.replace(start, end, text);
        }
    }

    /// The edits of [`Walker::slice`]: the opening bracket, each colon and the closing bracket
    /// replaced.
    fn slice_edits(&self, s: &ast::Spanned<ast::Slice>) -> Option<Vec<(u32, u32, String)>> {
        let bytes = self.source.as_bytes();
        let mut open = s.expr.span().end_offset as usize;
        while matches!(bytes.get(open), Some(b')' | b' ' | b'\t' | b'\n' | b'\r')) {
            open += 1;
        }
        let close = (s.span().end_offset as usize).checked_sub(1)?;
        if bytes.get(open) != Some(&b'[') || bytes.get(close) != Some(&b']') {
            return None;
        }
        // The colons: outside the bounds' own text.
        let spans: Vec<(usize, usize)> = [&s.start, &s.stop, &s.step]
            .into_iter()
            .flatten()
            .map(|e| (self.start(e) as usize, e.span().end_offset as usize))
            .collect();
        let mut colons = Vec::new();
        let mut at = open + 1;
        while at < close {
            if let Some(&(_, end)) = spans.iter().find(|(start, _)| *start == at) {
                at = end.max(at + 1);
                continue;
            }
            if bytes[at] == b':' {
                colons.push(at);
            }
            at += 1;
        }
        if colons.is_empty() || colons.len() > 2 {
            return None;
        }
        let missing = |part: &Option<ast::Expr>| if part.is_none() { "none" } else { "" };
        let mut edits = vec![(
            open as u32,
            open as u32 + 1,
            format!(")|{SLICE_FILTER}({}", missing(&s.start)),
        )];
        edits.push((
            colons[0] as u32,
            colons[0] as u32 + 1,
            format!(", {}", missing(&s.stop)),
        ));
        let tail = match colons.get(1) {
            Some(&second) => {
                edits.push((
                    second as u32,
                    second as u32 + 1,
                    format!(", {}", missing(&s.step)),
                ));
                "))".to_string()
            }
            None => ", none))".to_string(),
        };
        let tail = match self.folded_slice == Some(s.span().start_offset) {
            true => tail.replacen("))", ", true))", 1),
            false => tail,
        };
        edits.push((close as u32, close as u32 + 1, tail));
        Some(edits)
    }
}
