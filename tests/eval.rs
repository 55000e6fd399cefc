//! The eval: every question of `eval/questions.md`, answered by hand in that file, is
//! run against the tools on the embedded demo and checked line by line.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use serde_json::Value;
use tradedesk_tools::call;
use tradedesk_tools::config::demo_context;

const QUESTIONS: &str = include_str!("../eval/questions.md");

#[derive(Debug)]
struct Question {
    title: String,
    tool: String,
    args: Value,
    expects: Vec<String>,
}

fn fenced<'a>(section: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("```{tag}\n");
    let start = section.find(&open)? + open.len();
    let len = section[start..].find("```")?;
    Some(&section[start..start + len])
}

fn parse_questions(text: &str) -> Vec<Question> {
    text.split("\n## ")
        .skip(1)
        .filter(|s| s.starts_with('Q'))
        .map(|section| {
            let title = section.lines().next().unwrap_or_default().to_owned();
            let call =
                fenced(section, "call").unwrap_or_else(|| panic!("{title}: no ```call block"));
            let (tool, args) = call
                .trim()
                .split_once(char::is_whitespace)
                .unwrap_or((call.trim(), "{}"));
            let args = serde_json::from_str(args.trim())
                .unwrap_or_else(|e| panic!("{title}: bad call JSON: {e}"));
            let expects = fenced(section, "expect")
                .unwrap_or_else(|| panic!("{title}: no ```expect block"))
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect();
            Question {
                title,
                tool: tool.to_owned(),
                args,
                expects,
            }
        })
        .collect()
}

/// Splits `a.b[k=v.w].c` on dots outside brackets.
fn segments(path: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in path.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            '.' if depth == 0 => {
                out.push(&path[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&path[start..]);
    out
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn lookup<'a>(root: &'a Value, path: &str) -> Result<&'a Value, String> {
    let mut node = root;
    for seg in segments(path) {
        let (name, selector) = match seg.split_once('[') {
            Some((name, rest)) => (
                name,
                Some(rest.strip_suffix(']').ok_or(format!("bad segment {seg}"))?),
            ),
            None => (seg, None),
        };
        if !name.is_empty() {
            node = node
                .get(name)
                .ok_or_else(|| format!("no field '{name}' in {path}"))?;
        }
        if let Some(sel) = selector {
            let items = node
                .as_array()
                .ok_or_else(|| format!("{name} is not an array"))?;
            node = match sel.split_once('=') {
                Some((field, want)) => items
                    .iter()
                    .find(|item| {
                        item.get(field)
                            .is_some_and(|v| as_text(v) == want || number_eq(v, want))
                    })
                    .ok_or_else(|| format!("no element of {name} with {field}={want}"))?,
                None => {
                    let i: usize = sel.parse().map_err(|_| format!("bad index {sel}"))?;
                    items
                        .get(i)
                        .ok_or_else(|| format!("{name}[{i}] out of range"))?
                }
            };
        }
    }
    Ok(node)
}

fn number_eq(v: &Value, want: &str) -> bool {
    match (v.as_f64(), want.parse::<f64>()) {
        (Some(a), Ok(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
        _ => false,
    }
}

fn values_equal(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Number(_), Value::Number(e)) => number_eq(actual, &e.to_string()),
        _ => actual == expected,
    }
}

fn check(result: &Value, line: &str) -> Result<(), String> {
    if let Some(path) = line.strip_suffix(" exists") {
        return lookup(result, path.trim()).map(|_| ());
    }
    if let Some((path, needle)) = line.split_once(" contains ") {
        let needle: String =
            serde_json::from_str(needle.trim()).map_err(|e| format!("bad needle: {e}"))?;
        let node = lookup(result, path.trim())?;
        let found = match node {
            Value::String(s) => s.contains(&needle),
            Value::Array(items) => items.iter().any(|i| as_text(i).contains(&needle)),
            _ => false,
        };
        return if found {
            Ok(())
        } else {
            Err(format!("{path} does not contain {needle:?}: {node}"))
        };
    }
    if let Some((path, n)) = line.split_once(" length = ") {
        let node = lookup(result, path.trim())?;
        let len = node
            .as_array()
            .map(Vec::len)
            .ok_or(format!("{path} is not an array"))?;
        let want: usize = n.trim().parse().map_err(|_| format!("bad length {n}"))?;
        return if len == want {
            Ok(())
        } else {
            Err(format!("{path} has {len} elements, expected {want}"))
        };
    }
    let (path, expected) = line
        .split_once(" = ")
        .ok_or(format!("unreadable expect line: {line}"))?;
    let expected: Value = serde_json::from_str(expected.trim())
        .map_err(|e| format!("bad expected JSON in '{line}': {e}"))?;
    let actual = lookup(result, path.trim())?;
    if values_equal(actual, &expected) {
        Ok(())
    } else {
        Err(format!("{path} = {actual}, expected {expected}"))
    }
}

#[test]
fn every_eval_question_matches_its_hand_worked_answer() {
    let questions = parse_questions(QUESTIONS);
    assert!(
        questions.len() >= 20,
        "the eval needs at least 20 questions, found {}",
        questions.len()
    );
    let ctx = demo_context("eval").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for q in &questions {
        assert!(!q.expects.is_empty(), "{}: no expectations", q.title);
        let result = rt
            .block_on(call(&ctx, &q.tool, q.args.clone()))
            .unwrap_or_else(|e| panic!("{}: {e}", q.title))
            .structured;
        for line in &q.expects {
            checked += 1;
            if let Err(why) = check(&result, line) {
                failures.push(format!("{}\n    {line}\n    -> {why}", q.title));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} eval checks failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
