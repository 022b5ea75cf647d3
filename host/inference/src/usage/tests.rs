use std::sync::Arc;

use futures::StreamExt;

use super::*;

fn metering(strip_usage: bool) -> Metering {
    Metering {
        caller: "key_1".into(),
        model: "m".into(),
        served_by: "rep_1".into(),
        node: "node_1".into(),
        started: Instant::now(),
        strip_usage,
        trace: None,
    }
}

fn streamed(chunks: Vec<&'static str>) -> Answer {
    let stream = futures::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from(c))));
    Answer {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        body: AnswerBody::Streaming(stream.boxed()),
    }
}

async fn read(answer: Answer) -> String {
    let mut body = answer.body.into_stream();
    let mut text = Vec::new();
    while let Some(chunk) = body.next().await {
        text.extend_from_slice(&chunk.unwrap());
    }
    String::from_utf8(text).unwrap()
}

const USAGE: &str = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n";

#[tokio::test]
async fn a_stream_is_metered_and_the_usage_the_client_did_not_ask_for_is_taken_out() {
    let meter = Arc::new(UsageMeter::new(8));
    let mut events = meter.take_receiver().unwrap();
    // Events split across chunks, as a carrier may deliver them.
    let answer = streamed(vec![
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n",
        "\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n",
        USAGE,
        "data: [DONE]\n\n",
    ]);
    let text = read(meter_answer(&meter, answer, true)).await;
    assert!(!text.contains("usage"), "{text}");
    assert!(
        text.contains("\"a\"") && text.contains("\"b\"") && text.ends_with("data: [DONE]\n\n"),
        "{text}"
    );
    let event = events.recv().await.unwrap();
    assert_eq!(
        (
            event.prompt_tokens,
            event.completion_tokens,
            event.cached_tokens
        ),
        (7, 3, 2)
    );
    assert!(event.reported && event.stream);
    assert_eq!(event.status, 200);
}

#[tokio::test]
async fn usage_the_client_asked_for_stays_in_its_stream() {
    let meter = Arc::new(UsageMeter::new(8));
    let mut events = meter.take_receiver().unwrap();
    let text = read(meter_answer(
        &meter,
        streamed(vec![USAGE, "data: [DONE]\n\n"]),
        false,
    ))
    .await;
    assert_eq!(text, format!("{USAGE}data: [DONE]\n\n"));
    assert_eq!(events.recv().await.unwrap().completion_tokens, 3);
}

#[tokio::test]
async fn a_whole_answer_is_read_for_its_usage_and_passed_on_unchanged() {
    let meter = Arc::new(UsageMeter::new(8));
    let mut events = meter.take_receiver().unwrap();
    let body = "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9}}";
    let stream =
        futures::stream::iter([Ok(Bytes::from(&body[..10])), Ok(Bytes::from(&body[10..]))]);
    let answer = Answer {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: AnswerBody::Streaming(stream.boxed()),
    };
    assert_eq!(read(meter_answer(&meter, answer, false)).await, body);
    let event = events.recv().await.unwrap();
    assert_eq!(
        (event.prompt_tokens, event.completion_tokens, event.stream),
        (5, 9, false)
    );
}

#[tokio::test]
async fn a_stream_the_client_drops_is_recorded_as_cut_and_a_full_queue_counts_its_drops() {
    let meter = Arc::new(UsageMeter::new(1));
    let mut events = meter.take_receiver().unwrap();
    let mut body = meter_answer(
        &meter,
        streamed(vec!["data: {\"choices\":[]}\n\n", USAGE]),
        true,
    )
    .body
    .into_stream();
    body.next().await;
    drop(body);
    let event = events.recv().await.unwrap();
    assert_eq!((event.status, event.reported), (499, false));

    let answer = |m: &Arc<UsageMeter>| meter_answer(m, streamed(vec![USAGE]), true);
    read(answer(&meter)).await;
    read(answer(&meter)).await;
    assert_eq!(meter.dropped(), 1, "the second waits in a queue of one");
    meter.written(1, true);
    let mut text = String::new();
    meter.render(&mut text);
    for line in [
        "switchyard_usage_events_queued_total 2",
        "switchyard_usage_events_dropped_total 1",
        "switchyard_usage_events_written_total 1",
        "switchyard_usage_events_failed_total 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in {text}");
    }
}

#[test]
fn a_streamed_request_is_asked_for_its_usage_once() {
    let asked = ask_for_usage(br#"{"model":"m","stream":true}"#).unwrap();
    let json: Value = serde_json::from_slice(&asked).unwrap();
    assert_eq!(json["stream_options"]["include_usage"], true);
    assert_eq!(ask_for_usage(&asked), None, "the client asked already");
}

fn meter_answer(meter: &Arc<UsageMeter>, answer: Answer, strip: bool) -> Answer {
    super::meter(meter.clone(), answer, metering(strip), None)
}

#[test]
fn usage_is_found_alone_null_or_in_a_string_is_none() {
    let whole = br#"{"id":"x","choices":[{"message":{"content":"the \"usage\" word"}}],"usage":{"prompt_tokens":4,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}},"z":1}"#;
    assert_eq!(
        find_tokens(whole),
        Some(Tokens {
            prompt: 4,
            completion: 2,
            cached: 1
        })
    );
    assert_eq!(find_tokens(br#"{"choices":[],"usage":null}"#), None);
    let word_first = br#"{"content":"usage","usage":{"prompt_tokens":3}}"#;
    assert_eq!(find_tokens(word_first).map(|t| t.prompt), Some(3));
    assert_eq!(
        find_tokens(br#"{"choices":[{"delta":{"content":"x"}}]}"#),
        None
    );
}

#[test]
fn a_body_without_stream_options_gets_them_spliced_in() {
    let asked = ask_for_usage(b"  {\"model\":\"m\",\"stream\":true}").unwrap();
    let json: Value = serde_json::from_slice(&asked).unwrap();
    assert_eq!(
        (
            json["model"].as_str(),
            json["stream_options"]["include_usage"].as_bool()
        ),
        (Some("m"), Some(true))
    );
    let empty: Value = serde_json::from_slice(&ask_for_usage(b"{}").unwrap()).unwrap();
    assert_eq!(empty["stream_options"]["include_usage"], true);
    let off = ask_for_usage(br#"{"stream_options":{"include_usage":false}}"#).unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&off).unwrap()["stream_options"]["include_usage"],
        true
    );
}

#[test]
fn an_event_ends_at_its_first_blank_line_in_either_line_ending() {
    assert_eq!(super::find_event_end(b"data: a\n\ndata: b\n\n"), Some(9));
    assert_eq!(super::find_event_end(b"data: a\r\n\r\ndata: b"), Some(11));
    assert_eq!(super::find_event_end(b"data: a\ndata: b\n"), None);
    assert_eq!(super::find_event_end(b"data: a\r\n"), None);
    assert_eq!(super::find_event_end(b""), None);
}
