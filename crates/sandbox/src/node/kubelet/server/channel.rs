//! The framing of Kubernetes' remote command WebSocket protocols
//! (`v4.channel.k8s.io`, `v5.channel.k8s.io`): every binary message starts
//! with the number of its channel (0 stdin, 1 stdout, 2 stderr, 3 error,
//! 4 resize); v5 adds 255, a message `[255, n]` closing channel `n` (the
//! client closes stdin this way when its input ends). The error channel
//! carries one v1 Status when the command ends.

use serde_json::{Value, json};

pub const V5: &str = "v5.channel.k8s.io";
pub const V4: &str = "v4.channel.k8s.io";
/// The protocols served, most preferred first.
pub const PROTOCOLS: [&str; 2] = [V5, V4];

pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
pub const CLOSE: u8 = 255;

/// One message for the client.
pub fn frame(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(data.len() + 1);
    message.push(channel);
    message.extend_from_slice(data);
    message
}

/// What a message from the client asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    Stdin(&'a [u8]),
    /// Stdin ended (v5).
    CloseStdin,
    /// A terminal size; sessions here have no terminal.
    Resize,
    /// A message for no channel the client may write to.
    Ignored,
}

pub fn parse(message: &[u8], v5: bool) -> Incoming<'_> {
    match message {
        [STDIN, data @ ..] => Incoming::Stdin(data),
        [CLOSE, STDIN, ..] if v5 => Incoming::CloseStdin,
        [RESIZE, ..] => Incoming::Resize,
        _ => Incoming::Ignored,
    }
}

/// The Status ending a session: success, or kube's `NonZeroExitCode`
/// failure whose `ExitCode` cause kubectl exits with.
pub fn exit_status(code: i32, command: &[String]) -> Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command {command:?}, exit code {code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// The Status of a command that could not run.
pub fn failure_status(message: &str) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_prefixed_with_its_channel() {
        assert_eq!(frame(STDOUT, b"out\n"), b"\x01out\n");
        assert_eq!(frame(STDERR, b""), vec![2]);
    }

    #[test]
    fn client_messages_are_read_by_channel_and_protocol() {
        assert_eq!(parse(b"\x00hi", true), Incoming::Stdin(b"hi"));
        assert_eq!(parse(&[255, 0], true), Incoming::CloseStdin);
        // v4 has no close channel.
        assert_eq!(parse(&[255, 0], false), Incoming::Ignored);
        assert_eq!(
            parse(br#"{"Width":80,"Height":24}"#, true),
            Incoming::Ignored
        );
        assert_eq!(parse(b"\x04{\"Width\":80}", true), Incoming::Resize);
        assert_eq!(parse(b"", true), Incoming::Ignored);
        assert_eq!(parse(b"\x01x", true), Incoming::Ignored);
    }

    #[test]
    fn a_non_zero_exit_carries_its_code_as_a_cause() {
        let command = vec!["sh".to_owned(), "-c".to_owned(), "exit 3".to_owned()];
        let status = exit_status(3, &command);
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["reason"], "NonZeroExitCode");
        assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(status["details"]["causes"][0]["message"], "3");
        assert_eq!(exit_status(0, &command)["status"], "Success");
    }
}
