//! Target variables read in the program: which DWARF access plans
//! (`crate::dwarf::plan`) a handler compiled for the data plane evaluates
//! itself, with the registers the function common entry stores in the
//! block (`layout::Block::regs`) and memory read by the safe load
//! (`strings`' `process_vm_readv`: a bad pointer is an error return,
//! never a fault).
//!
//! The compiled code cannot pick a plan by the firing site (a wildcard's
//! sites share one handler and the stub does not say which fired), so a
//! plan runs in the program only when every site has the same chain. A
//! link-time address (`@var`, a static) is added to the load bias the
//! function common entry copies from the site's hook list (each process
//! and module has its own list), so its sites must also be in one module.
//! A thread-local or a floating point value stays in the tracer, as do
//! `DW_OP_piece` values and places the tracer would refuse at the hit
//! ("not accessible"): the tracer words those errors.

use crate::dwarf::plan::{Access, Chain, Final, Loc, Op, Piece, Site, Step, plan_of};

/// Registers a chain may read: DWARF 0..=15, the general purpose ones.
pub const REGS: u16 = 16;

/// A plan the program can evaluate: its chain, and whether it reads
/// registers or the load bias (then only at a function's entry, where
/// the common entry stores them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub chain: Chain,
    pub reads_regs: bool,
}

/// Plan `id` as the program evaluates it, or why it cannot.
pub fn plan(id: i64) -> Result<Plan, &'static str> {
    let access = plan_of(id).ok_or("has no plan")?;
    let Site::Long(chain) = one_site(&access)? else {
        return Err("is printed as text");
    };
    Ok(Plan {
        chain: chain.clone(),
        reads_regs: chain_ok(&access, chain)?,
    })
}

/// The one site plan every site of `access` has ([`plan`], [`text`]).
fn one_site(access: &Access) -> Result<&Site, &'static str> {
    let mut sites = access.sites.iter().map(|(_, _, s)| s).chain(&access.any);
    let first = sites.next().ok_or("has no plan")?;
    match sites.any(|s| s != first) {
        true => Err("is found differently at the probe's sites"),
        false => Ok(first),
    }
}

/// Whether the program can evaluate `chain` of `access` (its location,
/// its load bias's module, its steps and final read); whether it reads
/// registers or the bias.
fn chain_ok(access: &Access, chain: &Chain) -> Result<bool, &'static str> {
    let regs = loc_ok(&chain.loc)?;
    if uses_bias(&chain.loc) && modules(access) != 1 {
        return Err("is at a link-time address in more than one module");
    }
    place_ok(chain)?;
    Ok(regs)
}

/// Plan `id` as the program evaluates a text of it (`$$parms`, `$$vars`,
/// `$$locals`: words and `%#x` numbers, the same at every site), or why
/// it cannot: its numbers, each a chain as [`plan`] requires or `None`
/// for one the tracer shows as `?` whatever the hit (optimised out, a
/// member of a value in registers), and whether one reads registers or
/// the load bias. `$var$` (pretty-printing, which reads structures) stays
/// in the tracer.
pub fn text(id: i64) -> Result<(Vec<Option<Chain>>, bool), &'static str> {
    let access = plan_of(id).ok_or("has no plan")?;
    let Site::Text(pieces) = one_site(&access)? else {
        return Err("is a number");
    };
    let mut chains = Vec::new();
    let mut regs = false;
    for p in pieces {
        match p {
            Piece::Text(_) => {}
            Piece::Hex(c) if matches!(c.loc, Loc::Unavailable) || unplaced(c) => chains.push(None),
            Piece::Hex(c) => {
                regs |= chain_ok(&access, c)?;
                chains.push(Some(c.clone()));
            }
            Piece::Pretty(..) => return Err("is pretty-printed (`$`), which reads structures"),
        }
    }
    Ok((chains, regs))
}

/// The text of plan `id` (accepted by [`text`]) with the program's
/// `values`: each number's value and whether it was read, in order; `?`
/// for one that was not, as the tracer's `Machine::text` shows it.
pub fn render_text(id: i64, values: &[i64]) -> Option<String> {
    let access = plan_of(id)?;
    let site = access
        .sites
        .first()
        .map(|(_, _, s)| s)
        .or(access.any.as_ref())?;
    let Site::Text(pieces) = site else {
        return None;
    };
    let mut out = String::new();
    let mut next = values.chunks_exact(2);
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Hex(_) => match next.next()? {
                [v, 1] => out.push_str(&format!("{:#x}", *v as u64)),
                _ => out.push('?'),
            },
            Piece::Pretty(..) => return None,
        }
    }
    Some(out)
}

/// Whether the tracer's `Machine::place` or `long` refuses the chain's
/// steps or final read whatever the hit (it shows `?` then).
fn unplaced(c: &Chain) -> bool {
    match walk_place(c) {
        Some(memory) => c.fin == Final::Address && !memory,
        None => true,
    }
}

/// Whether the chain's place is in memory after its steps (a location in
/// memory or in pieces, or a pointer followed), or `None` when a member
/// or index step meets a value, which the tracer's `Machine::place`
/// refuses. The code generator follows the same walk.
fn walk_place(c: &Chain) -> Option<bool> {
    let mut memory = matches!(c.loc, Loc::Memory(_) | Loc::Pieces(_));
    for s in &c.steps {
        match s {
            Step::Deref => memory = true,
            Step::Offset(_) | Step::Index { .. } if !memory => return None,
            _ => {}
        }
    }
    Some(memory)
}

/// How many modules the plan's sites are in (0 for a site-independent
/// plan, which has no bias).
fn modules(access: &Access) -> usize {
    let mut m: Vec<&String> = access.sites.iter().map(|(m, _, _)| m).collect();
    m.sort();
    m.dedup();
    m.len()
}

/// Whether the location's operations are the program's to run; whether
/// they read a register.
fn loc_ok(loc: &Loc) -> Result<bool, &'static str> {
    match loc {
        Loc::Register(r) if *r < REGS => Ok(true),
        Loc::Register(_) => Err("is in a floating point register"),
        Loc::Memory(ops) | Loc::Value(ops) => {
            let mut regs = false;
            for op in ops {
                match op {
                    Op::Reg(r) if *r < REGS => regs = true,
                    Op::Reg(_) => return Err("is computed from a floating point register"),
                    Op::Addr(_) => regs = true,
                    Op::Tls(_) | Op::ModuleTls => return Err("is thread-local"),
                    Op::Input(k) if *k >= 2 => return Err("reads a third script value"),
                    _ => {}
                }
            }
            Ok(regs)
        }
        Loc::Pieces(_) => Err("is assembled from pieces"),
        Loc::Unavailable => Err("is optimised out here"),
    }
}

/// Whether the location adds a module's load bias.
fn uses_bias(loc: &Loc) -> bool {
    matches!(loc, Loc::Memory(ops) | Loc::Value(ops) if ops.iter().any(|o| matches!(o, Op::Addr(_))))
}

/// Whether the chain's steps and final read reach a place the program
/// can read (the tracer's `Machine::place` and `long` would not refuse).
fn place_ok(chain: &Chain) -> Result<(), &'static str> {
    let memory = walk_place(chain).ok_or("is a member of a value in registers")?;
    if chain
        .steps
        .iter()
        .any(|s| matches!(s, Step::Index { arg, .. } if *arg >= 2))
    {
        return Err("reads a third script value");
    }
    match chain.fin {
        Final::Address if !memory => Err("has no address"),
        Final::Float { .. } => Err("is a floating point value"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwarf::plan::{Access, register};

    fn at(sites: Vec<Site>) -> i64 {
        register(Access {
            sites: sites
                .into_iter()
                .enumerate()
                .map(|(i, s)| ("/bin/x".to_string(), 0x1000 + i as u64, s))
                .collect(),
            any: None,
        })
    }

    fn long(loc: Loc, steps: Vec<Step>) -> Site {
        Site::Long(Chain {
            loc,
            steps,
            fin: Final::Load {
                size: 4,
                signed: true,
            },
        })
    }

    #[test]
    fn a_parameter_in_a_register_or_on_the_stack_is_the_programs() {
        let reg = at(vec![long(Loc::Register(5), vec![])]);
        assert!(plan(reg).unwrap().reads_regs);
        let stack = at(vec![long(
            Loc::Memory(vec![Op::Reg(7), Op::PlusConst(-20)]),
            vec![Step::Deref, Step::Offset(8)],
        )]);
        assert!(plan(stack).is_ok());
    }

    #[test]
    fn what_needs_a_site_or_the_tracer_stays_there() {
        let global = at(vec![long(Loc::Memory(vec![Op::Addr(0x4000)]), vec![])]);
        assert!(plan(global).unwrap().reads_regs);
        let two_modules = register(Access {
            sites: ["/bin/x", "/lib/y.so"]
                .iter()
                .map(|m| {
                    (
                        m.to_string(),
                        0x1000,
                        long(Loc::Memory(vec![Op::Addr(0x4000)]), vec![]),
                    )
                })
                .collect(),
            any: None,
        });
        assert!(plan(two_modules).is_err());
        let two = at(vec![
            long(Loc::Register(5), vec![]),
            long(Loc::Register(4), vec![]),
        ]);
        assert_eq!(plan(two), Err("is found differently at the probe's sites"));
        let member = at(vec![long(Loc::Register(5), vec![Step::Offset(8)])]);
        assert!(plan(member).is_err());
        let gone = at(vec![long(Loc::Unavailable, vec![])]);
        assert!(plan(gone).is_err());
        let xmm = at(vec![long(Loc::Register(17), vec![])]);
        assert!(plan(xmm).is_err());
    }
}
