//! Process tables: [`FakeTable`] (synthetic, for tests) and [`ProcTable`]
//! (the real `/proc`, via [`crate::procfs`]).

use std::cell::Cell;
use std::collections::HashMap;
use std::path::PathBuf;

use super::{Environ, ProcStat, ProcessTable, ReadErr};
use crate::procfs::{self, PidFd, ProcError};

/// One synthetic process.
#[derive(Clone, Debug)]
pub struct FakeProc {
    pub ppid: i32,
    pub start_time: u64,
    pub uid: u32,
    pub exe: Result<PathBuf, ReadErr>,
    pub environ: Result<Environ, ReadErr>,
    /// `comm` and `argv[0]`; `new` takes both from the exe's file name.
    pub names: Result<Vec<Vec<u8>>, ReadErr>,
    /// Simulates a process that exits while it is being read: its pin
    /// reports it dead afterwards.
    pub exits_during_read: bool,
}

impl FakeProc {
    pub fn new(ppid: i32, start_time: u64, exe: &str, env: &[(&str, &str)]) -> FakeProc {
        let base = exe.rsplit('/').next().unwrap_or(exe).as_bytes().to_vec();
        FakeProc {
            names: Ok(vec![base.clone(), base]),
            ppid,
            start_time,
            uid: 1000,
            exe: Ok(PathBuf::from(exe)),
            environ: Ok(env
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect()),
            exits_during_read: false,
        }
    }
}

/// A HashMap-backed process table. A pid that is not in the map is gone.
#[derive(Clone, Debug, Default)]
pub struct FakeTable {
    pub procs: HashMap<i32, FakeProc>,
    /// How many processes were pinned (lets tests see the walk happened).
    pub pins: Cell<usize>,
}

impl FakeTable {
    pub fn new() -> FakeTable {
        FakeTable::default()
    }

    pub fn insert(&mut self, pid: i32, p: FakeProc) -> &mut FakeTable {
        self.procs.insert(pid, p);
        self
    }

    fn get(&self, pid: i32) -> Result<&FakeProc, ReadErr> {
        self.procs.get(&pid).ok_or(ReadErr::Gone)
    }
}

impl ProcessTable for FakeTable {
    type Pin = i32;

    fn pin(&self, pid: i32) -> Result<i32, ReadErr> {
        self.get(pid)?;
        self.pins.set(self.pins.get() + 1);
        Ok(pid)
    }

    fn still_alive(&self, pin: &i32) -> Result<bool, ReadErr> {
        Ok(self.procs.get(pin).is_some_and(|p| !p.exits_during_read))
    }

    fn stat(&self, pid: i32) -> Result<ProcStat, ReadErr> {
        let p = self.get(pid)?;
        Ok(ProcStat {
            pid,
            ppid: p.ppid,
            start_time: p.start_time,
        })
    }

    fn uid(&self, pid: i32) -> Result<u32, ReadErr> {
        Ok(self.get(pid)?.uid)
    }

    fn exe(&self, pid: i32) -> Result<PathBuf, ReadErr> {
        self.get(pid)?.exe.clone()
    }

    fn environ(&self, pid: i32) -> Result<Environ, ReadErr> {
        self.get(pid)?.environ.clone()
    }

    fn names(&self, pid: i32) -> Result<Vec<Vec<u8>>, ReadErr> {
        self.get(pid)?.names.clone()
    }
}

impl From<ProcError> for ReadErr {
    fn from(e: ProcError) -> ReadErr {
        match e {
            ProcError::Gone => ReadErr::Gone,
            ProcError::Denied => ReadErr::Denied,
            ProcError::Changed => ReadErr::Gone,
            ProcError::Malformed | ProcError::TooLarge | ProcError::Unsupported | ProcError::Io => {
                ReadErr::Other
            }
        }
    }
}

/// How the real table pins a process.
#[derive(Debug)]
pub enum ProcPin {
    /// A pidfd: alive means not reaped since it was opened.
    Fd(PidFd),
    /// Fallback without pidfds: the pid and the start time read at pin time;
    /// alive means the same start time on a re-read.
    Start(i32, u64),
}

/// The real `/proc`, read through [`crate::procfs`] (bounded reads).
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcTable;

impl ProcessTable for ProcTable {
    type Pin = ProcPin;

    fn pin(&self, pid: i32) -> Result<ProcPin, ReadErr> {
        match PidFd::open(pid) {
            Ok(fd) => Ok(ProcPin::Fd(fd)),
            Err(ProcError::Unsupported) => {
                Ok(ProcPin::Start(pid, procfs::read_stat(pid)?.start_time))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn still_alive(&self, pin: &ProcPin) -> Result<bool, ReadErr> {
        match pin {
            ProcPin::Fd(fd) => Ok(fd.is_alive()),
            ProcPin::Start(pid, start) => match procfs::read_stat(*pid) {
                Ok(st) => Ok(st.start_time == *start),
                Err(ProcError::Gone) => Ok(false),
                Err(e) => Err(e.into()),
            },
        }
    }

    fn stat(&self, pid: i32) -> Result<ProcStat, ReadErr> {
        let st = procfs::read_stat(pid)?;
        Ok(ProcStat {
            pid: st.pid,
            ppid: st.ppid,
            start_time: st.start_time,
        })
    }

    fn uid(&self, pid: i32) -> Result<u32, ReadErr> {
        Ok(procfs::read_uid(pid)?)
    }

    fn exe(&self, pid: i32) -> Result<PathBuf, ReadErr> {
        Ok(procfs::read_exe(pid)?)
    }

    fn environ(&self, pid: i32) -> Result<Environ, ReadErr> {
        Ok(procfs::read_environ(pid)?)
    }

    fn names(&self, pid: i32) -> Result<Vec<Vec<u8>>, ReadErr> {
        Ok(vec![procfs::read_comm(pid)?, procfs::read_argv0(pid)?])
    }
}
