//! Wire refusal codes and startup error codes: static kebab-case strings,
//! never OS text, paths, session IDs or tokens.

/// Why a request was refused. The only thing a client learns on refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Bytes after EOF are not one UTF-8 JSON object.
    MalformedRequest,
    /// EOF arrived without a terminating newline (includes an empty connection).
    UnterminatedFrame,
    /// Bytes followed the first newline (at once or after a delay).
    MultipleFrames,
    /// More than 64 KiB before the frame ended.
    FrameTooLarge,
    /// The one-second connection deadline passed before newline + EOF.
    DeadlineExceeded,
    /// Too many connections in flight.
    Busy,
    /// `action` is not one of the four requests.
    UnknownAction,
    /// A key the request does not allow.
    UnknownField,
    /// A required key is absent.
    MissingField,
    /// A key appears twice in one JSON object.
    DuplicateField,
    /// A key has the wrong type or range.
    InvalidField,
    /// `register_anchor` carried a `session_id` key (even null or empty).
    SessionIdForbidden,
    /// `binding` is not exactly the five binding fields with valid values.
    InvalidBinding,
    /// SO_PEERCRED gave no usable identity.
    PeerUnidentified,
    /// The connecting process no longer exists, or its pid changed hands
    /// before it could be pinned.
    PeerGone,
    /// The kernel has no pidfd (before Linux 5.3): the peer cannot be pinned.
    PeerPinUnsupported,
    /// `/proc` could not be read for a reason other than a vanished process.
    ProcUnreadable,
    /// No session with this `session_id`.
    UnknownSession,
    /// The session's anchor (pid, starttime) no longer exists.
    AnchorGone,
    /// The peer is not the anchor or one of its descendants.
    NotDescendant,
    /// The re-read of the walked chain disagreed with the first read.
    AncestryChanged,
    /// `runtime_generation` is lower than the stored one.
    StaleGeneration,
    /// `register_anchor` from an anchor that already has a session at this generation.
    AlreadyRegistered,
    /// Session limit reached (after dropping sessions of dead anchors).
    TooManySessions,
    /// Unconsumed-token limit of the session reached.
    TooManyTokens,
    /// No such token in this session.
    UnknownToken,
    /// The token was already consumed (or superseded by a newer generation).
    TokenConsumed,
    /// The new state could not be made durable; nothing changed.
    StateWriteFailed,
    /// OS randomness unavailable or another internal failure.
    Internal,
}

impl Code {
    /// Every code, for documentation tests.
    pub const ALL: &'static [Code] = &[
        Code::MalformedRequest,
        Code::UnterminatedFrame,
        Code::MultipleFrames,
        Code::FrameTooLarge,
        Code::DeadlineExceeded,
        Code::Busy,
        Code::UnknownAction,
        Code::UnknownField,
        Code::MissingField,
        Code::DuplicateField,
        Code::InvalidField,
        Code::SessionIdForbidden,
        Code::InvalidBinding,
        Code::PeerUnidentified,
        Code::PeerGone,
        Code::PeerPinUnsupported,
        Code::ProcUnreadable,
        Code::UnknownSession,
        Code::AnchorGone,
        Code::NotDescendant,
        Code::AncestryChanged,
        Code::StaleGeneration,
        Code::AlreadyRegistered,
        Code::TooManySessions,
        Code::TooManyTokens,
        Code::UnknownToken,
        Code::TokenConsumed,
        Code::StateWriteFailed,
        Code::Internal,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::MalformedRequest => "malformed-request",
            Code::UnterminatedFrame => "unterminated-frame",
            Code::MultipleFrames => "multiple-frames",
            Code::FrameTooLarge => "frame-too-large",
            Code::DeadlineExceeded => "deadline-exceeded",
            Code::Busy => "busy",
            Code::UnknownAction => "unknown-action",
            Code::UnknownField => "unknown-field",
            Code::MissingField => "missing-field",
            Code::DuplicateField => "duplicate-field",
            Code::InvalidField => "invalid-field",
            Code::SessionIdForbidden => "session-id-forbidden",
            Code::InvalidBinding => "invalid-binding",
            Code::PeerUnidentified => "peer-unidentified",
            Code::PeerGone => "peer-gone",
            Code::PeerPinUnsupported => "peer-pin-unsupported",
            Code::ProcUnreadable => "proc-unreadable",
            Code::UnknownSession => "unknown-session",
            Code::AnchorGone => "anchor-gone",
            Code::NotDescendant => "not-descendant",
            Code::AncestryChanged => "ancestry-changed",
            Code::StaleGeneration => "stale-generation",
            Code::AlreadyRegistered => "already-registered",
            Code::TooManySessions => "too-many-sessions",
            Code::TooManyTokens => "too-many-tokens",
            Code::UnknownToken => "unknown-token",
            Code::TokenConsumed => "token-consumed",
            Code::StateWriteFailed => "state-write-failed",
            Code::Internal => "internal",
        }
    }
}

/// Why the daemon refused to start: printed as one line `{"error":CODE}` on
/// stderr, exit code 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartupError {
    /// Bad command line.
    Usage,
    /// The state path is a symlink (O_NOFOLLOW → ELOOP).
    StateSymlink,
    /// The state path is not a regular file.
    StateNotRegular,
    /// The state file's mode is not exactly 0600.
    StateMode,
    /// The state file is owned by another user.
    StateOwner,
    /// The state file exceeds the size bound.
    StateTooLarge,
    /// The state file could not be opened or read.
    StateUnreadable,
    /// The state file is not valid JSON of the state schema.
    StateCorrupt,
    /// The state file violates an invariant (bad ids, tokens, limits).
    StateInvalid,
    /// Two sessions for one (anchor_pid, anchor_starttime).
    StateDuplicateAnchor,
    /// Another daemon holds the lock beside this state file.
    StateLocked,
    /// The socket path exists and is not a socket.
    SocketPathOccupied,
    /// The socket could not be bound or listened on.
    SocketBindFailed,
}

impl StartupError {
    /// Every startup code, for documentation tests.
    pub const ALL: &'static [StartupError] = &[
        StartupError::Usage,
        StartupError::StateSymlink,
        StartupError::StateNotRegular,
        StartupError::StateMode,
        StartupError::StateOwner,
        StartupError::StateTooLarge,
        StartupError::StateUnreadable,
        StartupError::StateCorrupt,
        StartupError::StateInvalid,
        StartupError::StateDuplicateAnchor,
        StartupError::StateLocked,
        StartupError::SocketPathOccupied,
        StartupError::SocketBindFailed,
    ];

    /// The stderr string.
    pub fn as_str(self) -> &'static str {
        match self {
            StartupError::Usage => "usage",
            StartupError::StateSymlink => "state-symlink",
            StartupError::StateNotRegular => "state-not-regular",
            StartupError::StateMode => "state-mode",
            StartupError::StateOwner => "state-owner",
            StartupError::StateTooLarge => "state-too-large",
            StartupError::StateUnreadable => "state-unreadable",
            StartupError::StateCorrupt => "state-corrupt",
            StartupError::StateInvalid => "state-invalid",
            StartupError::StateDuplicateAnchor => "state-duplicate-anchor",
            StartupError::StateLocked => "state-locked",
            StartupError::SocketPathOccupied => "socket-path-occupied",
            StartupError::SocketBindFailed => "socket-bind-failed",
        }
    }
}
