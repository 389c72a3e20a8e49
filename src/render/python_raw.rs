//! The newline after `{% raw %}`, as jinja2 keeps it: with `trim_blocks`, jinja2 removes the
//! newline after `{% endraw %}` but not the one after `{% raw %}` (its `raw` tag has no block
//! suffix), where minijinja removes both. Before minijinja reads the template, each `{% raw %}`
//! that such a newline follows is written `{% raw +%}`, which keeps it.

/// `source` with the newline after each plain `{% raw %}` kept, or `None` where there is none.
pub fn kept_raw_newlines(source: &str) -> Option<String> {
    if !source.contains("raw") {
        return None;
    }
    let mut marks = Vec::new();
    let mut at = 0;
    while let Some(found) = source[at..].find('{') {
        let open = at + found;
        let rest = &source[open..];
        if let Some(comment) = rest.strip_prefix("{#") {
            // Nothing inside a comment is a tag.
            at = match comment.find("#}") {
                Some(end) => open + 2 + end + 2,
                None => source.len(),
            };
            continue;
        }
        let Some(tag) = rest.strip_prefix("{%") else {
            at = open + 1;
            continue;
        };
        match raw_tag(tag) {
            Some((len, plain)) => {
                let after = open + 2 + len;
                if plain && source[after..].starts_with('\n') {
                    marks.push(after - 2);
                }
                // The raw text is skipped whole: a `{% raw %}` inside it is text.
                at = end_of_raw(source, after);
            }
            None => at = open + 2,
        }
    }
    if marks.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(source.len() + marks.len());
    let mut copied = 0;
    for mark in marks {
        out.push_str(&source[copied..mark]);
        out.push('+');
        copied = mark;
    }
    out.push_str(&source[copied..]);
    Some(out)
}

/// Where `tag` (the text after a `{%`) is a `raw` tag: its length up to and with its `%}`, and
/// whether it closes without whitespace control.
fn raw_tag(tag: &str) -> Option<(usize, bool)> {
    let inner = tag.strip_prefix(['-', '+']).unwrap_or(tag).trim_start();
    let after = inner.strip_prefix("raw")?.trim_start();
    let (plain, close) = match after.strip_prefix(['-', '+']) {
        Some(close) => (false, close),
        None => (true, after),
    };
    close
        .starts_with("%}")
        .then(|| (tag.len() - close.len() + 2, plain))
}

/// Where the `{% endraw %}` after `from` ends (the source's end where none does).
fn end_of_raw(source: &str, from: usize) -> usize {
    let mut at = from;
    while let Some(found) = source[at..].find("{%") {
        let tag = &source[at + found + 2..];
        let inner = tag.strip_prefix(['-', '+']).unwrap_or(tag).trim_start();
        if let Some(after) = inner.strip_prefix("endraw") {
            if let Some(close) = after.find("%}") {
                return source.len() - after.len() + close + 2;
            }
        }
        at += found + 2;
    }
    source.len()
}

#[cfg(test)]
mod tests {
    use super::kept_raw_newlines;

    #[test]
    fn keeps_the_newline_after_a_plain_raw_tag() {
        assert_eq!(
            kept_raw_newlines("  {% raw %}\n{# c #}\n{% endraw %}\n").as_deref(),
            Some("  {% raw +%}\n{# c #}\n{% endraw %}\n")
        );
        assert_eq!(
            kept_raw_newlines("{%- raw %}\n{% raw %}\n{% endraw %}{% raw %}\nx{% endraw %}")
                .as_deref(),
            Some("{%- raw +%}\n{% raw %}\n{% endraw %}{% raw +%}\nx{% endraw %}")
        );
        assert_eq!(kept_raw_newlines("{% raw -%}\n{% endraw %}"), None);
        assert_eq!(
            kept_raw_newlines("{# {% raw %}\n #}{% raw %}x{% endraw %}"),
            None
        );
        assert_eq!(kept_raw_newlines("{{ raw }}\n"), None);
    }
}
