//! The scopes of blocks: jinja2 runs a set block's and a filter block's body in a scope of its
//! own, which minijinja gives with `{% with %}`; a `with` block whose body leaves its loop early,
//! which minijinja cannot run (`continue` or `break` leaves its frame behind), becomes `set` tags.

use minijinja::machinery::ast;

use super::{python_for_else, Walker};

impl Walker<'_> {
    /// jinja2 runs a `{% set x %}` block's body in a scope of its own (what it sets is not seen
    /// after it), where minijinja runs it in the enclosing one: the body is wrapped in
    /// `{% with %}...{% endwith %}`.
    pub(super) fn set_block_scope(&mut self, s: &ast::Spanned<ast::SetBlock>) {
        let head_end = match &s.filter {
            Some(filter) => filter.span().end_offset,
            None => s.target.span().end_offset,
        };
        self.scope_of_its_own(&s.body, head_end, s.span().end_offset, "endset");
    }

    /// The body of a block (`body`, the opening tag's content ending at `head_end`, the block
    /// ending at `end` with its closing tag, `keyword`) wrapped in `{% with %}...{% endwith %}`,
    /// each tag with the whitespace control of the tag it follows or precedes, so that what the
    /// body sets is not seen after it.
    pub(super) fn scope_of_its_own(
        &mut self,
        body: &[ast::Stmt],
        head_end: u32,
        end: u32,
        keyword: &str,
    ) {
        // A `continue` or `break` may not leave a `with` block (minijinja loses track of its
        // frames): such a body keeps minijinja's scope.
        if python_for_else::leaves_early(body) {
            return;
        }
        let (head_end, end) = (head_end as usize, end as usize);
        let (Some(head), Some(tail)) = (
            self.source.get(head_end..end),
            self.source.get(..end.saturating_sub(keyword.len())),
        ) else {
            return;
        };
        // `  -%}` after the opening tag's content: the opening tag's end.
        let after = head.trim_start();
        let (open_mark, after) = match after.strip_prefix(['-', '+']) {
            Some(rest) => (&after[..1], rest),
            None => ("", after),
        };
        if !after.starts_with("%}") {
            return;
        }
        let open_at = end - after.len() + 2;
        // `{%-  ` before the closing keyword: the closing tag's start.
        let before = tail.trim_end();
        let (close_mark, before) = match before.strip_suffix(['-', '+']) {
            Some(rest) => (&before[before.len() - 1..], rest),
            None => ("", before),
        };
        if !before.ends_with("{%") || self.source.get(tail.len()..end) != Some(keyword) {
            return;
        }
        let close_at = before.len() - 2;
        self.insert(open_at as u32, format!("{{% with {open_mark}%}}"));
        self.insert(close_at as u32, format!("{{%{close_mark} endwith %}}"));
    }

    /// A `with` block whose body holds a `continue` or `break` of the loop around it: minijinja
    /// would jump out of the block's frame and stop. Its tags become `set` tags instead: the
    /// names' values before the block are saved, all values are evaluated before any is bound
    /// (as jinja2 does), and the saved values are bound again at `endwith`. What the body sets
    /// itself stays after the block (jinja2 scopes it).
    pub(super) fn with_without_frame(&mut self, w: &ast::Spanned<ast::WithBlock>) {
        if !python_for_else::leaves_early(&w.body) {
            return;
        }
        let (Some(names), Some(edits)) = (target_names(w), self.with_spots(w)) else {
            return;
        };
        let WithSpots {
            open,
            mark,
            equals,
            close,
            end_keyword,
        } = edits;
        let end = w.span().end_offset;
        if names.is_empty() {
            let keyword = self.source[open as usize..]
                .find("with")
                .map(|at| open + at as u32);
            if let Some(keyword) = keyword {
                self.replace(keyword, keyword + 4, "if true".to_string());
                self.replace(end_keyword, end, "endif".to_string());
            }
            return;
        }
        self.withs += 1;
        let saved = format!("__sft_py_with_{}", self.withs);
        let list = names.join(", ");
        let (open_text, close_text, end_text) = if names.len() == 1 {
            (
                format!("{{%{mark} set {saved} = {list} %}}{{% set {list} ="),
                String::new(),
                format!("set {list} = {saved}"),
            )
        } else {
            (
                format!("{{%{mark} set {saved} = [{list}] %}}{{% set {list} = ["),
                "]".to_string(),
                format!("set {list} = {saved}"),
            )
        };
        self.replace(open, equals[0] + 1, open_text);
        for (k, (target, _)) in w.assignments.iter().enumerate().skip(1) {
            self.replace(target.span().start_offset, equals[k] + 1, String::new());
        }
        if !close_text.is_empty() {
            self.insert(close, close_text);
        }
        self.replace(end_keyword, end, end_text);
    }

    /// A `with` block whose later value names an earlier target (`{% with a = 1, b = a %}`):
    /// jinja2 evaluates every value before it binds any, so `b` sees the `a` from before the
    /// block, where minijinja binds each in turn. The values are evaluated, in their order, into
    /// names of their own by an outer `with`, and the targets bound from those names by an inner
    /// one. A value that only seems to name a target (in a string, after a dot) takes the same
    /// path, which gives the same values.
    pub(super) fn with_values_first(&mut self, w: &ast::Spanned<ast::WithBlock>) {
        if w.assignments.len() < 2 || python_for_else::leaves_early(&w.body) {
            return;
        }
        let Some(names) = target_names(w) else {
            return;
        };
        let source = self.source;
        let names_earlier = w
            .assignments
            .iter()
            .enumerate()
            .skip(1)
            .any(|(k, (_, value))| {
                let span = value.span();
                source
                    .get(span.start_offset as usize..span.end_offset as usize)
                    .is_some_and(|text| names[..k].iter().any(|name| names_word(text, name)))
            });
        if !names_earlier {
            return;
        }
        let Some(spots) = self.with_spots(w) else {
            return;
        };
        self.withs += 1;
        let block = self.withs;
        let temp = |k: usize| format!("__sft_py_with_{block}_{k}");
        let rebind: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(k, name)| format!("{name} = {}", temp(k)))
            .collect();
        self.replace(
            spots.open,
            spots.equals[0] + 1,
            format!("{{%{} with {} =", spots.mark, temp(0)),
        );
        for (k, (target, _)) in w.assignments.iter().enumerate().skip(1) {
            self.replace(
                target.span().start_offset,
                spots.equals[k] + 1,
                format!("{} =", temp(k)),
            );
        }
        self.insert(spots.close, format!(" %}}{{% with {}", rebind.join(", ")));
        let end = w.span().end_offset;
        self.replace(spots.end_keyword, end, "endwith %}{% endwith".to_string());
    }

    /// Where the tags of `with` block `w` are written: its `{%`, the whitespace mark after
    /// it, the `=` of each assignment, where the opening tag's closing (`  -%}`) starts, and
    /// where its `endwith` keyword starts (the block's span ends after it).
    fn with_spots(&self, w: &ast::Spanned<ast::WithBlock>) -> Option<WithSpots> {
        let source = self.source;
        let start = w.span().start_offset as usize;
        let open = source.get(..start + 2)?.rfind("{%")?;
        let mark = match source[open + 2..].chars().next() {
            Some(c @ ('-' | '+')) => c.to_string(),
            _ => String::new(),
        };
        let mut equals = Vec::new();
        for (target, _) in &w.assignments {
            let after = target.span().end_offset as usize;
            let rest = source.get(after..)?;
            let gap = rest.len() - rest.trim_start().len();
            rest[gap..].starts_with('=').then_some(())?;
            equals.push((after + gap) as u32);
        }
        // The opening tag's `%}` after its last value (or after `with`), and before it an
        // optional mark and whitespace.
        let head_end = match w.assignments.last() {
            Some((_, value)) => value.span().end_offset as usize,
            None => open + 2,
        };
        let tag_end = head_end + source.get(head_end..)?.find("%}")?;
        let closing = source[..tag_end]
            .trim_end_matches(['-', '+'])
            .trim_end()
            .len();
        let end = w.span().end_offset as usize;
        let end_keyword = end.checked_sub("endwith".len())?;
        (source.get(end_keyword..end)? == "endwith").then_some(())?;
        Some(WithSpots {
            open: open as u32,
            mark,
            equals,
            close: closing as u32,
            end_keyword: end_keyword as u32,
        })
    }
}

/// The names a `with` block binds, where every target is a plain name.
fn target_names<'s>(w: &ast::Spanned<ast::WithBlock<'s>>) -> Option<Vec<&'s str>> {
    w.assignments
        .iter()
        .map(|(target, _)| match target {
            ast::Expr::Var(v) => Some(v.id),
            _ => None,
        })
        .collect()
}

/// Whether `text` holds `name` as a word of its own.
fn names_word(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(word)
            && !text[at + name.len()..].chars().next().is_some_and(word)
    })
}

/// See [`Walker::with_spots`].
struct WithSpots {
    open: u32,
    mark: String,
    equals: Vec<u32>,
    close: u32,
    end_keyword: u32,
}
