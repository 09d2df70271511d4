//! Every refusal the bus can give, as a static kebab-case code.
//!
//! This is the one list. A code is what crosses the wire (`{"ok":false,"error":CODE}`),
//! what a refused boot prints on stderr, and what the README documents. Internal
//! causes (SQLite errors, I/O errors) are logged by kind and mapped to one of these;
//! their text never reaches a client.

use std::fmt;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident => $text:literal, )*) => {
        /// A static refusal code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
        }

        impl Code {
            /// Every code, in declaration order (the README table follows it).
            pub const ALL: &'static [Code] = &[ $( Code::$variant, )* ];

            /// The wire string.
            pub const fn as_str(self) -> &'static str {
                match self { $( Code::$variant => $text, )* }
            }
        }
    };
}

codes! {
    // --- start, boot and the host channel -------------------------------
    /// The command line is malformed.
    Usage => "usage",
    /// The boot config or a host op is malformed (shape, types, unknown keys).
    InvalidConfig => "invalid-config",
    /// A normalized business fails validation.
    InvalidBusiness => "invalid-business",
    /// `dataRoot` is not an absolute, existing directory owned by the user (a symlink to one
    /// refuses too).
    DataRoot => "data-root",
    /// A path under `bus/` is a symlink, not the expected file type, not owned, or too open
    /// (a symlinked `writer.lock` too).
    UnsafePath => "unsafe-path",
    /// `writer.lock` exists as a regular file: another broker runs, or one crashed and an
    /// operator must act.
    WriterLocked => "writer-locked",
    /// The database carries a schema version this broker does not run.
    SchemaVersion => "schema-version",
    /// The schema source or the produced `sqlite_master` differs from the pinned digest.
    SchemaDigest => "schema-digest",
    /// The database exists but its metadata is missing or malformed.
    SchemaMetadata => "schema-metadata",
    /// `quick_check` or `foreign_key_check` failed.
    Integrity => "integrity",
    /// The database is not in WAL mode.
    JournalMode => "journal-mode",
    /// A stored timestamp is not canonical or not strictly increasing.
    Timestamp => "timestamp",
    /// `mosaic-migrate` found no store at `<dataRoot>/bus/bus.sqlite`; it never creates one.
    StoreMissing => "store-missing",
    /// `bus.sqlite` can't be read as a SQLite database (not one, truncated, damaged):
    /// `mosaic-bus verify`, `backup` and `export`.
    StoreUnreadable => "store-unreadable",
    /// `bus/seals.sqlite` is missing where a sealing broker has run (`verify`).
    SealsMissing => "seals-missing",
    /// `bus/seals.sqlite` is not a seals file (not SQLite, truncated, damaged, another format).
    SealsUnreadable => "seals-unreadable",
    /// `bus/seals.sqlite` seals another store (its store id differs from `bus.sqlite`'s).
    SealsForeign => "seals-foreign",
    /// `mosaic-bus backup`: the destination already exists (a symlink too, dangling or not), or
    /// its parent is not a directory we can write; nothing is written.
    BackupDestination => "backup-destination",
    /// The online backup failed, or the copy did not verify.
    BackupFailed => "backup-failed",
    /// `mosaic-bus export --after`: the cursor is not one `export` printed for this store.
    ExportCursor => "export-cursor",
    /// A migration step failed or did not produce its target schema; that step rolled back and
    /// the store stays at the version before it.
    MigrationStep => "migration-step",
    /// The requirements file is missing, unreadable or malformed.
    InvalidRequirements => "invalid-requirements",
    /// The first host message was not a boot.
    BootRequired => "boot-required",
    /// A second boot on a booted broker.
    AlreadyBooted => "already-booted",
    /// A host op the protocol does not know.
    UnknownOp => "unknown-op",
    /// The host channel was lost.
    ChannelLost => "channel-lost",
    /// The control socket peer is not the broker's user.
    PeerUid => "peer-uid",
    /// Another host is connected to the control socket; one at a time.
    HostBusy => "host-busy",
    /// Another broker already listens on the `--control` socket path.
    ControlInUse => "control-in-use",
    /// The proof helper could not be started.
    ProofdSpawn => "proofd-spawn",

    // --- launches -----------------------------------------------------------
    /// A launch record is malformed.
    InvalidLaunch => "invalid-launch",
    /// A launch names a harness that is not a plug-in module name.
    InvalidHarness => "invalid-harness",
    /// The launch's pid and start time do not name a live process.
    ProcessMismatch => "process-mismatch",
    /// A rebind changes the recorded role, harness, address or process identity.
    LaunchMismatch => "launch-mismatch",
    /// The run already ended.
    RunEnded => "run-ended",
    /// The run is not bound by this broker.
    UnknownRun => "unknown-run",
    /// The business id is not configured.
    UnknownBusiness => "unknown-business",

    // --- client socket ------------------------------------------------------
    /// Malformed frame, envelope or arguments; unknown keys.
    InvalidRequest => "invalid-request",
    /// The frame exceeds its size limit.
    RequestTooLarge => "request-too-large",
    /// The frame was not complete within the deadline.
    RequestTimeout => "request-timeout",
    /// The verb does not exist.
    UnknownVerb => "unknown-verb",
    /// The capability is unknown (never issued, or dropped when its run ended).
    UnknownCapability => "unknown-capability",
    /// The role or instance is not part of the business.
    UnknownRole => "unknown-role",
    /// Another run holds the role.
    RoleHeld => "role-held",
    /// The caller does not hold the role.
    NotHolder => "not-holder",
    /// The run was revoked from this role and may not claim it again.
    RunRevoked => "run-revoked",
    /// A reader capability asked for a mutation.
    ReadOnly => "read-only",
    /// The verb is for the human (or human and reader sessions) only.
    HumanRequired => "human-required",
    /// The verb is for role sessions only.
    AgentRequired => "agent-required",
    /// The action is not permitted.
    NotAuthorized => "not-authorized",
    /// Writing to the store failed; nothing was committed.
    StorageUnavailable => "storage-unavailable",

    // --- process proof (human and tester) ----------------------------------
    /// The proof's pid is not the socket peer's pid.
    ProofPid => "proof-pid",
    /// The peer's executable is not the configured shim.
    ProofExe => "proof-exe",
    /// The peer runs as another user.
    ProofUid => "proof-uid",
    /// The peer's start time differs from the proof's, or the process that connected is gone
    /// (or its pid named another process by the time it was pinned at accept).
    ProofStartTime => "proof-start-time",
    /// The nonce is not in the shim's own environment.
    ProofNonce => "proof-nonce",
    /// A `/proc` read failed.
    ProofUnreadable => "proof-unreadable",
    /// The ancestry has a loop.
    ProofAncestryLoop => "proof-ancestry-loop",
    /// An ancestor vanished during the walk.
    ProofAncestryVanished => "proof-ancestry-vanished",
    /// A known launch is an ancestor of the shim.
    ProofLaunchAncestor => "proof-launch-ancestor",
    /// A run marker is in the shim's or an ancestor's environment, or an ancestor goes by a
    /// coding agent's name (exe, `comm` or `argv[0]`).
    ProofRunMarker => "proof-run-marker",
    /// The proof helper is not available; it is being restarted.
    ProofUnavailable => "proof-unavailable",
    /// The kernel has no pidfd (before Linux 5.3), so the peer cannot be pinned: human and tester
    /// requests refuse (capability requests are served).
    PeerPinUnsupported => "peer-pin-unsupported",
    /// A tester shim runs under a managed run.
    TesterRequired => "tester-required",
    /// The business does not enable testers (`bus.tester`).
    TesterOff => "tester-off",
    /// The verb is not open to tester sessions.
    TesterRefused => "tester-refused",

    // --- credentials (issue 6) --------------------------------------------
    /// A credential file reference is relative or lies inside the data root or a repository.
    CredentialPath => "credential-path",
    /// A credential file is a symlink, not a regular file, not ours, or not exactly 0600.
    CredentialUnsafe => "credential-unsafe",
    /// A credential file is larger than 16 KiB.
    CredentialSize => "credential-size",
    /// A token is not 16 or more of `[A-Za-z0-9._~-]` with at most one final newline.
    CredentialFormat => "credential-format",
    /// A credential's date is missing, not strict `YYYY-MM-DD`, or of the wrong kind for its service.
    CredentialDate => "credential-date",
    /// A referenced credential file or environment variable does not exist.
    CredentialMissing => "credential-missing",
    /// A Vikunja credential is used on or after its expiry date (UTC).
    CredentialExpired => "credential-expired",
    /// A trusted service callback failed.
    ServiceFailed => "service-failed",

    // --- client library -----------------------------------------------------
    /// The connection failed or timed out after the request may have been sent.
    OutcomeUnknown => "outcome-unknown",
    /// The reply exceeded the client's 4 MiB cap (the broker refuses such a read itself).
    ResponseTooLarge => "response-too-large",

    // --- decisions and authority (issue 5) ---------------------------------
    /// The action is not in the broker's vocabulary (neither routed nor a hard wait).
    UnknownAction => "unknown-action",
    /// `decision.raise`: `options` is not 2..9 valid options with unique keys.
    InvalidOptions => "invalid-options",
    /// `decision.raise`: `recommendation` is not exactly one option key.
    InvalidRecommendation => "invalid-recommendation",
    /// `decision.raise`: `approvalChoice` (or the default `yes`) is not an option key.
    InvalidApprovalChoice => "invalid-approval-choice",
    /// A blocking decision needs a `task_ref`.
    TaskRequired => "task-required",
    /// `supersedes` does not name an open decision raised by the same role instance.
    SupersedeRefused => "supersede-refused",
    /// A within-role raise closes at once and must carry `choice`.
    ChoiceRequired => "choice-required",
    /// `choice` is not an option key, or a raise that does not close at once carries one.
    InvalidChoice => "invalid-choice",
    /// `project` is not one of the business's projects.
    UnknownProject => "unknown-project",
    /// No decision with that id in the caller's business.
    DecisionNotFound => "decision-not-found",
    /// The decision is already resolved or withdrawn.
    DecisionClosed => "decision-closed",
    /// The caller is not the decision's routed resolver.
    NotResolver => "not-resolver",
    /// Only the raising role instance (or the human) may withdraw.
    NotRaiser => "not-raiser",
    /// The action is not within-role for the caller, so it needs a decision.
    DecisionRequired => "decision-required",
    /// `role.revoke` with a reason would end the caller's own run.
    RoleEndRefused => "role-end-refused",
    /// The decision is for another role instance, action, target, class or holder.
    DecisionMismatch => "decision-mismatch",
    /// The decision is not resolved with its approval choice.
    DecisionNotApproved => "decision-not-approved",
    /// The decision's approval was already used.
    DecisionConsumed => "decision-consumed",
    /// The human revoked launches for the business (`launch.revoke`).
    LaunchRevoked => "launch-revoked",
    /// No run holds the target role.
    NotHeld => "not-held",
    /// The raiser's messaging lists would refuse the decision's close message.
    DecisionRouteRefused => "decision-route-refused",

    // --- messages and reads (issue 4) ---
    /// `message.read`, `replies`, `messages` `after`, `in_reply_to` or `corrects`
    /// names no message of the caller's business (or not one the caller may read).
    MessageNotFound => "message-not-found",
    /// A message class outside the spec's list (the schema's `messages_class` guard too).
    InvalidClass => "invalid-class",
    /// A tester's message body does not start with `[mos test]`.
    TesterPrefix => "tester-prefix",
    /// A role sent to `tester` without `in_reply_to` naming a tester's message.
    TesterReplyRequired => "tester-reply-required",
    /// `tasks {task_ref}` names no task of the business.
    TaskNotFound => "task-not-found",
    /// A request, a reply or evidence about to be written contains a loaded credential token.
    KnownToken => "known-token",
    /// A reference crosses businesses (schema guard `messages_same_business`).
    CrossBusiness => "cross-business",
    /// `message.read` of a message that was never delivered (schema guard `read_receipts_by_recipient`).
    NotDelivered => "not-delivered",
    /// An event body's `task_ref` differs from its subject (schema guard `events_task_subject`).
    TaskSubject => "task-subject",
    /// `recordEvent` asked for a kind only verbs and host ops may write.
    ReservedEvent => "reserved-event",
    /// A `task.created` event's `body.request` names no `human.input` of the business.
    HumanInputRequired => "human-input-required",
    /// `recordComments`: the cursor is not above the task's stored one (schema guard
    /// `task_comment_cursors_increase`); nothing is written.
    CursorNotIncreasing => "cursor-not-increasing",
    // --- reviews and pushes (issue 6) ---
    /// `review.request`: `commit` is an older pushed commit of the task, not its latest push.
    StaleCommit => "stale-commit",
    /// `review.request`: `commit` was never pushed for the task (or the task has no push);
    /// `spec.read`: `commit` is no commit reachable from the project's `HEAD`.
    UnknownCommit => "unknown-commit",
    /// `review.request`: `to` is the caller's own role.
    SelfReview => "self-review",
    /// `review.request`: `to` holds no `review.verdict` authority (within-role or cross-role).
    NotAReviewer => "not-a-reviewer",
    /// `review.verdict` or `reviewFetch`: no `review.requested` event on the task addressed to the caller's role.
    RequestNotFound => "request-not-found",
    /// `review.verdict`: the request already has a verdict.
    VerdictExists => "verdict-exists",
    /// `authorize` `task.close` on a pushed task: `verdict` names no `review.verdict` event on that task.
    VerdictNotFound => "verdict-not-found",
    /// `authorize` `task.close` on a pushed task: the cited verdict is not `approve`.
    VerdictNotApprove => "verdict-not-approve",
    /// `authorize` `task.close` on a pushed task: the cited verdict is for an older commit than the latest push.
    VerdictStale => "verdict-stale",
    // --- projects and threads (issue 20) ---
    /// A project of that name already exists in the business (schema guard `projects_one_name`).
    ProjectExists => "project-exists",
    /// A thread of that name already exists in the project (schema guard `threads_one_name`).
    ThreadExists => "thread-exists",
    /// Another run holds the thread (schema guard `thread_one_holder`).
    ThreadAlreadyHeld => "thread-already-held",
    /// A thread named where none may be: a launch record of a role that is not the thread
    /// instance, or a run claiming a second thread (schema guard `thread_one_per_run`).
    ThreadNotAllowed => "thread-not-allowed",
    /// A message filed under a thread of another business, or one whose instance neither sent
    /// nor receives it (schema guard `message_threads_match`).
    ThreadMismatch => "thread-mismatch",
    /// `project.create`: `repo` names none of the business's projects.
    UnknownRepo => "unknown-repo",
    /// `thread.create`, `thread.list`: no project with that id in the business.
    ProjectNotFound => "project-not-found",
    /// `thread.create`: no instance of the business has the thread definition (`assistant`).
    ThreadInstanceMissing => "thread-instance-missing",
    /// `thread.create`: more than one instance has the thread definition.
    ThreadInstanceAmbiguous => "thread-instance-ambiguous",
    /// No thread with that id (in the business, or of the launch record's instance).
    ThreadNotFound => "thread-not-found",
    /// The thread belongs to another user.
    ThreadNotOwned => "thread-not-owned",
    /// A launch record of the thread instance without `thread`.
    ThreadRequired => "thread-required",
    /// `message.send` from the human to the thread instance: use `thread.send`.
    ThreadRequiredUseThreadSend => "thread-required-use-thread-send",
    /// A message to the thread instance must reply (`in_reply_to`) to a chain that reaches a
    /// message in one of its threads.
    ThreadRequiredReplyToThreadMessage => "thread-required-reply-to-thread-message",
    /// The reply chain reaches a thread of another instance.
    ThreadInstanceMismatch => "thread-instance-mismatch",
    /// `assistant.stop`: the instance is not of the thread definition.
    NotAssistant => "not-assistant",
    // --- project records (issue 22) ---
    /// A decision's spec citation is incomplete or malformed: `project`, `spec_path`
    /// (`spec/north-star.md`) and `spec_commit` (a full SHA-1) come together (schema guard
    /// `decisions_spec_citation`).
    InvalidSpecCitation => "invalid-spec-citation",
    // --- the organization file, harness switches, staff requests (issue 23)
    /// An organization verb, but the boot config names no organization file.
    OrganizationOff => "organization-off",
    /// The organization file can't be read (missing, a symlink, not ours) or replaced.
    OrganizationUnavailable => "organization-unavailable",
    /// The organization file, or a value written to it, fails its shape or value checks.
    OrganizationInvalid => "organization-invalid",
    /// The `revision` sent is not the file's current one; nothing was written.
    OrganizationStale => "organization-stale",
    /// `instances.set` `op:"change"` names an instance the file does not hold.
    OrganizationUnknownInstance => "organization-unknown-instance",
    /// `instances.set` `op:"add"` names an instance the file already holds.
    OrganizationInstanceExists => "organization-instance-exists",
    /// An instance's definition is none the loaded business knows.
    OrganizationUnknownDefinition => "organization-unknown-definition",
    /// An instance's definition declares credentials, which only the business file sets.
    OrganizationCredentialsOutOfScope => "organization-credentials-out-of-scope",
    /// A route or assistant names a model whose harness is switched off.
    HarnessOff => "harness-off",
    /// A model names a harness the start did not load.
    HarnessRefused => "harness-refused",
    /// A thinking level the route's harness does not offer.
    ThinkingUnsupported => "thinking-unsupported",
    /// `staff.request` from an instance that is not of the `pm` definition.
    StaffRequestRefused => "staff-request-refused",
    /// `staff.request`: the business's launcher is not a `chief-of-staff` instance (or there is none).
    NoChiefOfStaff => "no-chief-of-staff",
    /// `name.set`: the name equals an instance key, `human` or `tester`.
    NameIsInstance => "name-is-instance",
    /// `name.set`: the name equals a role definition the business knows.
    NameIsRole => "name-is-role",
    /// `name.set`: another instance of the business holds that name now (schema guard
    /// `instance_names_taken`).
    NameTaken => "name-taken",
    // --- landing on main (issue 21) ---
    /// `checkLand`: no `task_ref`; an agent's landing always names its task.
    NoSubject => "no-subject",
    /// `checkLand` or `recordLand`: the task's latest push is no longer the approved verdict's
    /// commit, or `recordLand`'s `reviewed` is not the ticket's commit.
    RefMoved => "ref-moved",
    /// `recordLand` or `landRefused`: no open landing has that ticket (ended, never issued, or
    /// issued by a broker that has since stopped).
    LandUnknown => "land-unknown",
    // --- project records (issue 22), continued ---
    /// A project's repository can't be read: not a Git repository, no commit, `git` missing,
    /// failing, past its deadline or printing too much.
    ProjectUnavailable => "project-unavailable",
    /// The project file asked for is not in the commit read (never committed, or deleted).
    ProjectFileMissing => "project-file-missing",
    /// The committed project file is not UTF-8 or is larger than 1 MiB.
    ProjectFileInvalid => "project-file-invalid",
    // --- spec citations and BLOCK (issue 22, part A) ---
    /// `decision.raise` cites a spec commit that is not the spec's current file commit.
    StaleSpec => "stale-spec",
    /// `decision.raise` cites a spec whose latest change the business's human did not author.
    SpecUnconfirmed => "spec-unconfirmed",
    /// `message.send` of a BLOCK from an instance that is not of the `pm` or `cto` definition.
    BlockSender => "block-sender",
    /// `message.send` of a BLOCK to anyone but the chief-of-staff instance.
    BlockRecipient => "block-recipient",
    /// `message.send` of a BLOCK whose `in_reply_to` is not a spec review notice the bus sent
    /// the sender.
    BlockReplyRequired => "block-reply-required",
    // --- usage accounting (issue 24) ---
    // These name a turn's unknown outcome: `usage.end` (or `usage.begin`)
    // records and answers them, they are never a refusal.
    /// The run's harness has no built-in usage source, or its launch record names no
    /// `transcript`.
    UsageSourceAbsent => "usage-source-absent",
    /// The transcript could not be read (an I/O error, or a path that is neither a file nor a
    /// directory).
    UsageSourceFailed => "usage-source-failed",
    /// A whole line the turn appended is not an entry the source understands (not JSON, an
    /// assistant entry without integer token counts, counts past 2^63-1).
    UsageParseFailed => "usage-parse-failed",
    /// `usage.end` for a turn `usage.begin` never baselined.
    UsageBaselineMissing => "usage-baseline-missing",
    /// A transcript file is shorter than its baseline, its baselined bytes changed, or it is
    /// gone.
    UsageTranscriptRewritten => "usage-transcript-rewritten",
    /// The turn left a partial last line, or no final assistant entry.
    UsageTurnIncomplete => "usage-turn-incomplete",
    /// The transcript is past the reader's caps (files, total bytes, bytes one turn appended).
    UsageTranscriptTooLarge => "usage-transcript-too-large",
    // --- project writes (issue 22, part B) ---
    /// Another write holds the project's lock (`<repo>/.git/mosaic.lock`), or the repository's
    /// `HEAD` moved while the write was being made; nothing was committed.
    ProjectBusy => "project-busy",
    /// `record.write` of a file under `spec/`: only the human edits the spec (`project.file.save`).
    ProjectSpecHumanOnly => "project-spec-human-only",
    /// A project path that is not one of the writable files (`spec/north-star.md`,
    /// `docs/NAME.md`, `requirements/REQ-X-N.json`, `decisions/DEC-N.json`), or whose place in
    /// the committed tree is not a plain directory and a plain file (a symlink, a submodule).
    ProjectPathInvalid => "project-path-invalid",
    /// `project.file.save`: `base` is not the file's current commit (its last changing commit at
    /// `HEAD`, or `HEAD` itself for a file not there yet); nothing was written.
    StaleBase => "stale-base",
    /// A write whose bytes equal the committed file's: no commit is made.
    ProjectFileUnchanged => "project-file-unchanged",
    /// `record.write`: the record is not a valid document for its path (docs Markdown, or the
    /// requirement or decision JSON shape in `docs/decisions.md`).
    InvalidRecord => "invalid-record",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for Code {}

impl Code {
    /// Looks a wire string up; `None` for strings no code has.
    pub fn parse(s: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_kebab_case() {
        let mut seen = HashSet::new();
        for c in Code::ALL {
            let s = c.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(
                s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-' || b.is_ascii_digit()),
                "{s} is not kebab-case"
            );
            assert_eq!(Code::parse(s), Some(*c));
        }
    }

    /// A code prints as its wire string (logs and errors show it so).
    /// (`cargo mutants`: docs/testing.md.)
    #[test]
    fn every_code_displays_as_its_wire_string() {
        for c in Code::ALL {
            assert_eq!(c.to_string(), c.as_str());
        }
        assert_eq!(Code::KnownToken.to_string(), "known-token");
    }
}
