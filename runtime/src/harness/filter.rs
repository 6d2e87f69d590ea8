//! The output filter of golden cases (`NAME.filter`) and of the docs'
//! sample blocks: directives that make a traced run's output comparable
//! (pids, times, the order of lines written by different processes).

/// Applies `.filter` directives (one a line, `#` comments) to an output.
pub fn normalize(filter: &str, out: &[u8]) -> Result<Vec<u8>, String> {
    let text = String::from_utf8_lossy(out);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let re = |r: &str| regex::Regex::new(r).map_err(|e| format!("bad filter regex {r:?}: {e}"));
    for d in filter
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        if d == "squeeze" {
            // Runs of spaces (column padding that depends on widths) to one.
            let r = re("  +")?;
            for l in &mut lines {
                *l = r.replace_all(l, " ").into_owned();
            }
            continue;
        }
        if let Some(r) = d.strip_prefix("after ") {
            let r = re(r)?;
            let at = lines.iter().position(|l| r.is_match(l));
            lines.drain(..at.map_or(lines.len(), |i| i + 1));
        } else if let Some(r) = d.strip_prefix("drop ") {
            let r = re(r)?;
            lines.retain(|l| !r.is_match(l));
        } else if let Some(r) = d.strip_prefix("keep ") {
            let r = re(r)?;
            lines.retain(|l| r.is_match(l));
        } else if let Some(rest) = d.strip_prefix("replace ") {
            let (r, with) = rest
                .split_once(" => ")
                .ok_or(format!("bad filter line {d:?}"))?;
            let r = re(r)?;
            for l in &mut lines {
                *l = r.replace_all(l, with).into_owned();
            }
        } else if d == "sort" {
            lines.sort();
        } else {
            return Err(format!("unknown filter directive {d:?}"));
        }
    }
    Ok(lines
        .iter()
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect())
}
