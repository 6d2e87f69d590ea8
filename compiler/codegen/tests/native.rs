//! Compiles hand-built checked programs and runs them: the codegen and the
//! script runtime together, without the front end.

use utap_codegen::{Options, SourceList, compile};
use utap_compiler::ast::{BinOp, Span};
use utap_compiler::program::*;
use utap_runtime::format::{ConvKind, Conversion, FormatFlags, FormatNum, FormatPiece};
use utap_runtime::script::sink::BufferSink;
use utap_runtime::script::{RuntimeOptions, ScriptRuntime, scheduler};

fn sp(start: u32, end: u32) -> Span {
    Span {
        file: 0,
        start,
        end,
    }
}

fn long(n: i64, at: u32) -> Expr {
    Expr {
        kind: ExprKind::Long(n),
        ty: Type::Long,
        span: sp(at, at + 1),
    }
}

fn stmt(kind: StmtKind, at: u32) -> Stmt {
    Stmt {
        kind,
        span: sp(at, at + 1),
    }
}

/// `exit()` as a statement whose call spans `start..end`.
fn exit_stmt(start: u32, end: u32) -> Stmt {
    stmt(
        StmtKind::Expr(Expr {
            kind: ExprKind::Builtin {
                name: "exit",
                args: vec![],
            },
            ty: Type::Void,
            span: sp(start, end),
        }),
        start,
    )
}

fn printf(pieces: Vec<FormatPiece>, args: Vec<Expr>, at: u32) -> Stmt {
    stmt(
        StmtKind::Expr(Expr {
            kind: ExprKind::Print {
                kind: PrintKind::Printf,
                format: Some(pieces),
                args,
            },
            ty: Type::Void,
            span: sp(at, at + 6),
        }),
        at,
    )
}

fn conv_d() -> FormatPiece {
    FormatPiece::Conv(Conversion {
        flags: FormatFlags::default(),
        width: FormatNum::None,
        precision: FormatNum::None,
        kind: ConvKind::Signed,
    })
}

fn begin_probe(body: Vec<Stmt>) -> ProbeDef {
    ProbeDef {
        points: vec![ProbePoint {
            kind: PointKind::Begin(0),
            condition: None,
            text: "begin".into(),
            head: "begin".into(),
        }],
        locals: vec![],
        body: Block { stmts: body },
        name: "begin".into(),
        span: sp(0, 5),
    }
}

fn run(program: &Program, src: &str) -> (String, Vec<String>, i32) {
    let sources = SourceList(vec![("t.stp".into(), src.into())]);
    let compiled = compile(program, &sources, &Options::default()).expect("compiles");
    let mut rt = ScriptRuntime::new(compiled.image.clone(), RuntimeOptions::default());
    let mut sink = BufferSink::default();
    let status = scheduler::run(&mut rt, &mut sink, None);
    (String::from_utf8(sink.out).unwrap(), sink.err, status)
}

#[test]
fn hello_with_arithmetic() {
    // probe begin { printf("hello %d\n", 1+2); exit() }
    let src = "probe begin { printf(\"hello %d\\n\", 1+2); exit() }";
    let sum = Expr {
        kind: ExprKind::Binary {
            op: BinOp::Add,
            lhs: Box::new(long(1, 33)),
            rhs: Box::new(long(2, 35)),
        },
        ty: Type::Long,
        span: sp(33, 36),
    };
    let exit = exit_stmt(39, 45);
    let program = Program {
        probes: vec![begin_probe(vec![
            printf(
                vec![
                    FormatPiece::Text("hello ".into()),
                    conv_d(),
                    FormatPiece::Text("\n".into()),
                ],
                vec![sum],
                14,
            ),
            exit,
        ])],
        ..Program::default()
    };
    let (out, err, status) = run(&program, src);
    assert_eq!(out, "hello 3\n");
    assert!(err.is_empty(), "{err:?}");
    assert_eq!(status, 0);
}

#[test]
fn division_by_zero_reports_operator_location() {
    let src = "probe begin {\n  printf(\"%d\\n\", 1 / 0)\n}";
    let one = src.find("1 /").unwrap() as u32;
    let div = Expr {
        kind: ExprKind::Binary {
            op: BinOp::Div,
            lhs: Box::new(long(1, one)),
            rhs: Box::new(long(0, one + 4)),
        },
        ty: Type::Long,
        span: sp(one, one + 5),
    };
    let program = Program {
        probes: vec![begin_probe(vec![printf(
            vec![conv_d(), FormatPiece::Text("\n".into())],
            vec![div],
            16,
        )])],
        ..Program::default()
    };
    let (out, err, status) = run(&program, src);
    assert_eq!(out, "");
    assert_eq!(
        err,
        vec![
            "ERROR: division by 0 near operator '/' at t.stp:2:20".to_string(),
            "WARNING: Number of errors: 1, skipped probes: 0".to_string(),
            "Pass 5: run failed.  [man error::pass5]".to_string(),
        ]
    );
    assert_eq!(status, 1);
}

#[test]
fn min_long_divided_by_minus_one_wraps() {
    let src = "probe begin { printf(\"%d %d\\n\", x / -1, x % -1) }";
    let mk = |op| Expr {
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(long(i64::MIN, 30)),
            rhs: Box::new(long(-1, 34)),
        },
        ty: Type::Long,
        span: sp(30, 36),
    };
    let program = Program {
        probes: vec![begin_probe(vec![
            printf(
                vec![
                    conv_d(),
                    FormatPiece::Text(" ".into()),
                    conv_d(),
                    FormatPiece::Text("\n".into()),
                ],
                vec![mk(BinOp::Div), mk(BinOp::Mod)],
                14,
            ),
            exit_stmt(0, 1),
        ])],
        ..Program::default()
    };
    let (out, _, status) = run(&program, src);
    assert_eq!(out, format!("{} 0\n", i64::MIN));
    assert_eq!(status, 0);
}

#[test]
fn every_builtin_has_a_runtime_implementation() {
    let implemented: Vec<&str> = utap_runtime::script::builtins::symbols()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let missing: Vec<&str> = utap_compiler::builtins::BUILTINS
        .iter()
        .map(|b| b.name)
        .filter(|n| {
            !implemented.contains(n)
                && utap_runtime::script::builtins::long_to_string_index(n).is_none()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "builtins without an implementation: {missing:?}"
    );
}

#[test]
fn keeps_ir_and_reports_sizes() {
    let program = Program {
        probes: vec![begin_probe(vec![])],
        ..Program::default()
    };
    let sources = SourceList(vec![("t.stp".into(), "probe begin {}".into())]);
    let options = Options {
        keep_ir: true,
        ..Options::default()
    };
    let compiled = compile(&program, &sources, &options).expect("compiles");
    assert!(
        compiled.ir.starts_with("; probe begin\nfunction "),
        "{}",
        compiled.ir
    );
    assert_eq!(compiled.sizes.len(), 1);
    assert_eq!(compiled.sizes[0].name, "probe begin");
    assert!(compiled.sizes[0].bytes > 0);
}

#[test]
fn handlers_differing_in_constants_share_one_function() {
    // Four `begin` probes whose bodies differ only in a long and a string
    // literal (as the expansions of `syscall.*` differ in `name`; the first
    // two are the same, so the second is not even translated), and a fifth
    // with a different body that ends the run.
    let src = "probe begin { printf(\"%s %d\\n\", \"a\", 1) }";
    let conv_s = FormatPiece::Conv(Conversion {
        flags: FormatFlags::default(),
        width: FormatNum::None,
        precision: FormatNum::None,
        kind: ConvKind::Str,
    });
    let named = |name: &str, n: i64| {
        let s = Expr {
            kind: ExprKind::Str(name.into()),
            ty: Type::String,
            span: sp(29, 32),
        };
        begin_probe(vec![printf(
            vec![
                conv_s.clone(),
                FormatPiece::Text(" ".into()),
                conv_d(),
                FormatPiece::Text("\n".into()),
            ],
            vec![s, long(n, 34)],
            14,
        )])
    };
    let exit = exit_stmt(39, 45);
    let other = begin_probe(vec![
        printf(
            vec![conv_d(), FormatPiece::Text("\n".into())],
            vec![long(7, 34)],
            14,
        ),
        exit,
    ]);
    let program = Program {
        probes: vec![
            named("read", 1),
            named("read", 1),
            named("write", 2),
            named("read", 3),
            other,
        ],
        ..Program::default()
    };
    let sources = SourceList(vec![("t.stp".into(), src.into())]);
    let options = Options {
        keep_ir: true,
        ..Options::default()
    };
    let compiled = compile(&program, &sources, &options).expect("compiles");
    let sizes: Vec<(&str, usize)> = compiled
        .sizes
        .iter()
        .map(|s| (s.name.as_str(), s.shared_by))
        .collect();
    assert_eq!(sizes, vec![("probe begin", 4), ("probe begin", 1)]);
    let handlers: Vec<usize> = compiled
        .image
        .probes
        .iter()
        .map(|p| p.handler as usize)
        .collect();
    assert!(handlers[..4].iter().all(|&h| h == handlers[0]));
    assert_ne!(handlers[0], handlers[4]);
    assert!(
        compiled
            .ir
            .starts_with("; 4 probes share the next function (the values"),
        "{}",
        compiled.ir
    );
    let (out, err, status) = run(&program, src);
    assert_eq!(out, "read 1\nread 1\nwrite 2\nread 3\n7\n");
    assert!(err.is_empty(), "{err:?}");
    assert_eq!(status, 0);
}
