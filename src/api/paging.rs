//! Paging and label filtering shared by every List call.

use base64::Engine;
use kairship_wire::selectors::LabelSelector;
use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::proto::ListOptions;

pub const DEFAULT_PAGE_SIZE: usize = 500;
pub const MAX_PAGE_SIZE: usize = 1000;

/// Items sorted by key, cut after `page_token`, at most `page_size`.
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_page_token: String,
}

pub fn selector(opts: Option<&ListOptions>) -> Result<LabelSelector, ApiError> {
    let s = opts.map(|o| o.label_selector.as_str()).unwrap_or("");
    LabelSelector::parse(s).map_err(|e| ApiError::invalid("options.label_selector", e.message))
}

/// Whether `labels` satisfy the selector.
pub fn labels_match(sel: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    if sel.is_empty() {
        return true;
    }
    sel.matches_labels(|k| labels.and_then(|l| l.get(k)).map(String::as_str))
}

/// As [`labels_match`], for a cached object.
pub fn cached_labels_match(sel: &LabelSelector, o: &crate::cache::object::CachedObject) -> bool {
    sel.is_empty() || sel.matches_labels(|k| o.label(k))
}

pub fn paginate<T>(
    items: Vec<(String, T)>,
    opts: Option<&ListOptions>,
) -> Result<Page<T>, ApiError> {
    let size = opts.map(|o| o.page_size).unwrap_or(0);
    let token = opts.map(|o| o.page_token.as_str()).unwrap_or("");
    paginate_by(items, size, token, "options.")
}

/// The page token that continues after `key` (gRPC's `page_token`, the proxy's
/// `continue`: one scheme).
pub fn token(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

/// The key a [`token`] continues after; `None` for one this server did not issue.
pub fn after(token: &str) -> Option<String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}

/// As [`paginate`], from a request's own `page_size` and `page_token` fields (`prefix` is
/// how errors name them: `options.` in lists, empty in search).
pub fn paginate_by<T>(
    mut items: Vec<(String, T)>,
    page_size: i32,
    page_token: &str,
    prefix: &str,
) -> Result<Page<T>, ApiError> {
    let size = match page_size {
        0 => DEFAULT_PAGE_SIZE,
        n if n < 0 => {
            return Err(ApiError::invalid(
                format!("{prefix}page_size"),
                "must not be negative",
            ))
        }
        n => (n as usize).min(MAX_PAGE_SIZE),
    };
    let after = match Some(page_token).filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => Some(after(t).ok_or_else(|| {
            ApiError::invalid(
                format!("{prefix}page_token"),
                "not a token this server issued",
            )
        })?),
    };
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rest: Vec<(String, T)> = items
        .into_iter()
        .filter(|(k, _)| after.as_ref().is_none_or(|a| k > a))
        .collect();
    let next_page_token = if rest.len() > size {
        rest.truncate(size);
        rest.last().map(|(k, _)| token(k)).unwrap_or_default()
    } else {
        String::new()
    };
    Ok(Page {
        items: rest.into_iter().map(|(_, v)| v).collect(),
        next_page_token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_tokens_to_the_end() {
        let items: Vec<(String, u32)> = (0..25).map(|i| (format!("k{i:02}"), i)).collect();
        let mut opts = ListOptions {
            page_size: 10,
            ..Default::default()
        };
        let mut seen = Vec::new();
        loop {
            let p = paginate(items.clone(), Some(&opts)).expect("page");
            seen.extend(p.items);
            if p.next_page_token.is_empty() {
                break;
            }
            opts.page_token = p.next_page_token;
        }
        assert_eq!(seen, (0..25).collect::<Vec<_>>());
        let bad = ListOptions {
            page_token: "%%%".into(),
            ..Default::default()
        };
        assert!(
            matches!(paginate(items.clone(), Some(&bad)), Err(ApiError::InvalidArgument { ref field, .. }) if field == "options.page_token")
        );
        let neg = ListOptions {
            page_size: -1,
            ..Default::default()
        };
        assert!(paginate(items, Some(&neg)).is_err());
    }
}
