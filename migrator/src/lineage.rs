//! Every schema version a store may be at, oldest first, each pinned: the
//! schema text it was made from, that text's SHA-256 and the digest of the
//! `sqlite_master` it produces. Older versions keep their text as a fixture
//! under `fixtures/`, never edited; the newest is the broker's own
//! `schema.sql` (`store::schema::CURRENT`). When the broker moves on, its
//! current text becomes `fixtures/schema-<version>.sql` with its pins here.

use mosaic_bus::store::schema::{Pin, CURRENT};

/// The lineage. A new version appends a pin here and a step in
/// [`crate::steps::STEPS`] from the one before it.
pub const VERSIONS: &[Pin<'static>] = &[
    Pin {
        version: "3b",
        sql: include_str!("../fixtures/schema-3b.sql"),
        sha256: "6c5f5f1f8cd72aa447b7839a3bf69bf1108cdbaa55245426e328b32918e3e059",
        master: "5d53bc58870af536406d5a7f6a718cf6d649e3fde5b9ca59671e11201a8c75f6",
    },
    Pin {
        version: "3c",
        sql: include_str!("../fixtures/schema-3c.sql"),
        sha256: "2aeef394d21f5ea36c8c3e127979b4384143ac41dfe7401531dbe1c9a03760c8",
        master: "a0c8906db221311e09f61e30c9b6269f6ff207ac8f4753f7dc426049904c1dd8",
    },
    Pin {
        version: "3d",
        sql: include_str!("../fixtures/schema-3d.sql"),
        sha256: "ef830d2153d6f56dc786aa75beaac00a76029ca8d22a2d6b2ff5091f76153f25",
        master: "fb681ab68fd5d9f0da6ba94dbfa35747adbc38263ad48e38d6b779d9cadb60f7",
    },
    Pin {
        version: "3e",
        sql: include_str!("../fixtures/schema-3e.sql"),
        sha256: "37e1f771d9ce18f163c900153cda224baa252160fff33d0ca31b64e6a3c494f8",
        master: "b2e15544f2b3a7bc9188173edf8620b73dd59e81a5d917032bee59a997dfddb6",
    },
    Pin {
        version: "3f",
        sql: include_str!("../fixtures/schema-3f.sql"),
        sha256: "c394e96a8fdeb12aebf05f07833f181b2da8b4ca38a1d16d0f87789fda3b2688",
        master: "5e45b29945d2435dae7f57afdc70f17fe9976da5735034f99a00223994ea3987",
    },
    Pin {
        version: "3g",
        sql: include_str!("../fixtures/schema-3g.sql"),
        sha256: "a39d51ec3c21b45d31e5d4f36b6c943f8844cfc12b11edf2b35b5dbccc85ef2c",
        master: "28b08778e34261b18f2f383b46b3c53f30f15e4ed15789077990a6dcb86450fd",
    },
    Pin {
        version: "3h",
        sql: include_str!("../fixtures/schema-3h.sql"),
        sha256: "a18db0e5d98adc6f98a3bf707759b94c3c1480147ddcf86e84e97840bf2728af",
        master: "b5e9110bda18c7bb35423a4340492304e2d7c36e6d667ebba5b4d4a34cd5f4fa",
    },
    CURRENT,
];
