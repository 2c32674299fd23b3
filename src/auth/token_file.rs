//! Static bearer tokens in kube-apiserver's `--token-auth-file` format: one CSV line per
//! token, `token,user,uid,"group1,group2"` (the groups column optional).

use std::collections::HashMap;
use std::path::Path;

use super::{AuthSetupError, UserInfo};

/// Splits one CSV line, honouring double quotes (`""` is a literal quote).
fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quote".into());
    }
    fields.push(cur);
    Ok(fields)
}

/// Parses the file's text; `source` names it in errors.
pub fn parse(text: &str, source: &str) -> Result<HashMap<String, UserInfo>, AuthSetupError> {
    let bad = |line: usize, message: String| AuthSetupError::TokenFile {
        path: source.to_string(),
        line,
        message,
    };
    let mut tokens = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields = csv_fields(line).map_err(|e| bad(i + 1, e))?;
        if fields.len() < 3 {
            return Err(bad(
                i + 1,
                format!(
                    "expected token,user,uid[,\"groups\"], found {} column(s)",
                    fields.len()
                ),
            ));
        }
        let token = fields[0].trim().to_string();
        let name = fields[1].trim().to_string();
        if token.is_empty() || name.is_empty() {
            return Err(bad(
                i + 1,
                "the token and the user must not be empty".into(),
            ));
        }
        // `system:` names are Kubernetes' own components (system:kube-controller-manager,
        // ...); impersonated on an instance they would carry those components' rights.
        if name.starts_with("system:") {
            return Err(bad(
                i + 1,
                format!("user {name:?}: names starting with \"system:\" are reserved for Kubernetes components"),
            ));
        }
        let groups = fields
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let user = UserInfo {
            name,
            uid: fields[2].trim().to_string(),
            groups,
        };
        if tokens.insert(token, user).is_some() {
            return Err(bad(
                i + 1,
                "this token is already listed on an earlier line".into(),
            ));
        }
    }
    if tokens.is_empty() {
        return Err(bad(0, "no tokens in the file".into()));
    }
    Ok(tokens)
}

pub fn load(path: &Path) -> Result<HashMap<String, UserInfo>, AuthSetupError> {
    let text = std::fs::read_to_string(path).map_err(|e| AuthSetupError::Read {
        what: "--token-auth-file",
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kube_apiserver_format() {
        let t = parse(
            "# comment\nabc,alice,1,\"ops,dev\"\n\ndef,bob,2\n\"g,h\",carol,3,\"\"\n",
            "f",
        )
        .expect("parses");
        assert_eq!(t["abc"].name, "alice");
        assert_eq!(t["abc"].groups, vec!["ops", "dev"]);
        assert_eq!(t["def"].groups, Vec::<String>::new());
        assert_eq!(t["g,h"].name, "carol");
    }

    #[test]
    fn names_the_bad_line() {
        let e = parse("abc,alice,1\nxyz,bob\n", "tokens.csv").expect_err("two columns");
        assert!(e.to_string().contains("tokens.csv line 2"), "{e}");
        let e = parse("abc,alice,1\nabc,bob,2\n", "f").expect_err("duplicate");
        assert!(e.to_string().contains("already listed"), "{e}");
        let e = parse("abc,\"alice,1\n", "f").expect_err("quote");
        assert!(e.to_string().contains("unterminated"), "{e}");
        assert!(parse("\n# nothing\n", "f").is_err());
        let e = parse("abc,system:kube-controller-manager,1\n", "f").expect_err("system user");
        assert!(e.to_string().contains("reserved"), "{e}");
    }
}
