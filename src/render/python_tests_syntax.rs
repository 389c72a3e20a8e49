//! A test followed by arithmetic, as jinja2 parses it: `x is string + y` is `(x is string) + y`
//! in jinja2 (a test binds to its operand as tightly as a filter), where minijinja's parser
//! refuses the `+`. A template that does not parse otherwise is given a second chance: each such
//! test is written as the filter [`IS_FILTER`] (`x|__sft_py_is('string', false) + y`), which binds
//! the same way and which minijinja parses.

use minijinja::machinery::{tokenize, Token};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Rest, Value};
use minijinja::{Error, State};

/// The filter a test followed by arithmetic becomes: `x|__sft_py_is(name, negated, args...)`.
pub const IS_FILTER: &str = "__sft_py_is";

/// [`IS_FILTER`]: `value is [not] name(args)`.
pub fn is_filter(
    state: &mut State,
    value: Value,
    name: &str,
    negated: bool,
    args: Rest<Value>,
) -> Result<Value, Error> {
    let mut all = Vec::with_capacity(args.len() + 1);
    all.push(value);
    all.extend(args.0);
    let holds = state.perform_test(name, &all)?;
    Ok(Value::from(holds != negated))
}

/// [`rewrite`] of a template that does not parse as it is (generation tags read as the renderer
/// reads them) and does once rewritten; `None` otherwise.
pub fn reparsed(source: &str, syntax: &SyntaxConfig) -> Option<String> {
    use super::generation::{rewrite_generation_tags, Rewrite};
    let parses = |text: &str| {
        let transparent = rewrite_generation_tags(text, Rewrite::Transparent);
        minijinja::machinery::parse(&transparent, "chat_template", syntax.clone()).is_ok()
    };
    if parses(source) {
        return None;
    }
    rewrite(source, syntax.clone()).filter(|text| parses(text))
}

/// `source` with every test that an arithmetic operator follows written as [`IS_FILTER`], or
/// `None` where there is none (or the source does not tokenize).
pub fn rewrite(source: &str, syntax: SyntaxConfig) -> Option<String> {
    let tokens: Vec<(Token, usize, usize)> = tokenize(source, false, syntax)
        .map(|t| t.map(|(tok, span)| (tok, span.start_offset as usize, span.end_offset as usize)))
        .collect::<Result<_, _>>()
        .ok()?;
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if !matches!(tokens[i].0, Token::Ident("is")) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        let negated = matches!(tokens.get(j), Some((Token::Ident("not"), _, _)));
        if negated {
            j += 1;
        }
        let Some((Token::Ident(name), _, name_end)) = tokens.get(j) else {
            i += 1;
            continue;
        };
        // Arguments in parentheses: the matching closing one.
        let mut k = j + 1;
        let mut parens = None;
        if matches!(tokens.get(k), Some((Token::ParenOpen, _, _))) {
            let mut depth = 0;
            let mut m = k;
            while m < tokens.len() {
                match tokens[m].0 {
                    Token::ParenOpen => depth += 1,
                    Token::ParenClose => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                m += 1;
            }
            if m == tokens.len() {
                return None;
            }
            parens = Some((k, m));
            k = m + 1;
        }
        let arithmetic = matches!(
            tokens.get(k).map(|t| &t.0),
            Some(
                Token::Plus
                    | Token::Minus
                    | Token::Mul
                    | Token::Div
                    | Token::FloorDiv
                    | Token::Pow
                    | Token::Mod
            )
        );
        if arithmetic {
            let head = format!("|{IS_FILTER}('{name}', {negated}");
            match parens {
                None => edits.push((tokens[i].1, *name_end, format!("{head})"))),
                Some((open, close)) if close == open + 1 => {
                    edits.push((tokens[i].1, tokens[close].2, format!("{head})")))
                }
                Some((open, _)) => {
                    edits.push((tokens[i].1, *name_end, head));
                    edits.push((tokens[open].1, tokens[open].2, ", ".to_string()));
                }
            }
        }
        i = k.max(i + 1);
    }
    if edits.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(source.len() + edits.len() * 24);
    let mut last = 0;
    for (start, end, text) in edits {
        out.push_str(source.get(last..start)?);
        out.push_str(&text);
        last = end;
    }
    out.push_str(source.get(last..)?);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn tests_before_arithmetic_become_filters() {
        let syntax = minijinja::syntax::SyntaxConfig::default();
        assert_eq!(
            rewrite("{{ x is string + y }}", syntax.clone()).as_deref(),
            Some("{{ x |__sft_py_is('string', false) + y }}")
        );
        assert_eq!(
            rewrite("{{ a.b is not divisibleby(3) * 2 }}", syntax.clone()).as_deref(),
            Some("{{ a.b |__sft_py_is('divisibleby', true, 3) * 2 }}")
        );
        assert_eq!(rewrite("{{ x is string == y }}", syntax), None);
    }
}
