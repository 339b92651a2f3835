//! A request's head as the worker reads it, in one go (its method, URL
//! path, query and headers), and what the front reads of it by name: the
//! credentials, a body's and a keyed POST's headers, a proxied request's,
//! a stream's position. The edge fills a [`Head`] and asks; no route reads
//! a header of its own.

use super::body::{BodyHead, PostHead};
use super::{Credentials, ProxyRequest};
use crate::wire::header;

/// A request's head, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    /// Its method (`POST`).
    pub method: String,
    /// Its URL's path.
    pub path: String,
    /// Its URL's query string, as sent (none without a `?`).
    pub query: Option<String>,
    /// The query's pairs, decoded, in order.
    pub params: Vec<(String, String)>,
    /// Its headers (a name repeated is one value, joined, as the runtime gives it).
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// The header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// [`Head::header`], owned: what a submission's provider headers are read with.
    pub fn owned_header(&self, name: &str) -> Option<String> {
        self.header(name).map(str::to_owned)
    }

    /// The query parameter `name`'s first value, if any.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// [`Head::param`], owned.
    pub fn owned_param(&self, name: &str) -> Option<String> {
        self.param(name).map(str::to_owned)
    }

    /// The credentials it presents: `Authorization`, `x-api-key`.
    pub fn credentials(&self) -> Credentials<'_> {
        Credentials { authorization: self.header("Authorization"), api_key: self.header("x-api-key") }
    }

    /// Its body's head, for [`super::body::BodyRead::of`].
    pub fn body(&self) -> BodyHead<'_> {
        BodyHead { content_type: self.header("Content-Type"), content_length: self.header("Content-Length") }
    }

    /// Its keyed POST's head, for [`super::body::keyed_post`].
    pub fn post(&self) -> PostHead<'_> {
        PostHead { method: &self.method, idempotency_key: self.header(header::IDEMPOTENCY_KEY), body: self.body() }
    }

    /// A `/v1` request for [`super::proxy_job`]: its path, query, `Prefer`
    /// and `Cache-Control`, with the `body` read and the `model` it names.
    pub fn proxy_request<'a>(&'a self, body: &'a [u8], model: Option<&'a str>) -> ProxyRequest<'a> {
        ProxyRequest {
            path: &self.path,
            query: self.query.as_deref(),
            body,
            model,
            prefer: self.header(header::PREFER),
            cache_control: self.header("Cache-Control"),
        }
    }

    /// Where a stream's reader resumes: `?from=N`, else `Last-Event-ID: N`
    /// (what an `EventSource` sends when it reconnects); read by
    /// [`super::stream_from`].
    pub fn stream_from(&self) -> Option<&str> {
        self.param("from").or_else(|| self.header("Last-Event-ID"))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::Head;

    fn head(params: &[(&str, &str)], headers: &[(&str, &str)]) -> Head {
        let pairs = |list: &[(&str, &str)]| list.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
        Head {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            query: None,
            params: pairs(params),
            headers: pairs(headers),
        }
    }

    #[test]
    fn headers_are_found_by_any_case_and_params_by_their_first_value() {
        let head = head(&[("user", "a"), ("user", "b")], &[("content-type", "application/json")]);
        assert_eq!(head.header("Content-Type"), Some("application/json"));
        assert_eq!(head.owned_header("CONTENT-TYPE").as_deref(), Some("application/json"));
        assert_eq!(head.header("Accept"), None);
        assert_eq!(head.param("user"), Some("a"));
        assert_eq!(head.param("User"), None);
        assert_eq!(head.owned_param("user").as_deref(), Some("a"));
    }

    #[test]
    fn the_credentials_and_a_keyed_posts_head_are_its_headers() {
        let head = head(&[], &[("authorization", "Bearer k"), ("idempotency-key", "key-1"), ("content-length", "12")]);
        let credentials = head.credentials();
        assert_eq!((credentials.authorization, credentials.api_key), (Some("Bearer k"), None));
        let post = head.post();
        assert_eq!((post.method, post.idempotency_key), ("POST", Some("key-1")));
        assert_eq!((post.body.content_type, post.body.content_length), (None, Some("12")));
    }

    #[test]
    fn a_proxied_request_carries_its_path_query_prefer_and_cache_control() {
        let mut head = head(&[], &[("prefer", "wait=5"), ("cache-control", "no-cache")]);
        head.query = Some("api-version=1".into());
        let request = head.proxy_request(b"{}", Some("m"));
        assert_eq!((request.path, request.query), ("/v1/chat/completions", Some("api-version=1")));
        assert_eq!((request.prefer, request.cache_control), (Some("wait=5"), Some("no-cache")));
        assert_eq!((request.body, request.model), (&b"{}"[..], Some("m")));
    }

    #[test]
    fn a_streams_from_is_the_query_first_then_last_event_id() {
        assert_eq!(head(&[("from", "3")], &[("last-event-id", "7")]).stream_from(), Some("3"));
        assert_eq!(head(&[], &[("last-event-id", "7")]).stream_from(), Some("7"));
        assert_eq!(head(&[], &[]).stream_from(), None);
    }
}
