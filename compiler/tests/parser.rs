//! Parser tests, construct by construct: the canonical print shows how a
//! snippet was understood; error texts are compared exactly.

mod common;

use common::*;
use utap_compiler::ast::*;
use utap_compiler::parser::{self, NodeIds};
use utap_compiler::source::SourceMap;

fn body(stmts: &str) -> String {
    canonical(&format!("probe begin {{\n{stmts}\n}}"))
}

fn lines(stmts: &[&str]) -> String {
    let mut s = String::from("probe begin {\n");
    for l in stmts {
        s.push_str("  ");
        s.push_str(l);
        s.push('\n');
    }
    s.push_str("}\n");
    s
}

#[test]
fn probes_points_and_aliases() {
    assert_eq!(
        canonical(r#"probe process("/bin/ls").syscall.return ?, timer.ms(100), begin(-1) {}"#),
        "probe process(\"/bin/ls\").syscall.return?, timer.ms(100), begin(-1) {\n}\n"
    );
    assert_eq!(
        canonical("probe a!, b? if (x > 1), c if (y) {}"),
        "probe a!, b? if (x > 1), c if (y) {\n}\n"
    );
    assert_eq!(
        canonical("probe sys*call.*, *  { }"),
        "probe sys*call.*, * {\n}\n"
    );
    assert_eq!(
        canonical("probe syscall.x = process.syscall { name = \"x\" }"),
        "probe syscall.x = process.syscall {\n  name = \"x\";\n}\n"
    );
    assert_eq!(
        canonical("probe a.b += c, d {}"),
        "probe a.b += c, d {\n}\n"
    );
    let s = parse("probe a = b = c {}").unwrap();
    match &s.items[0] {
        Item::Alias(a) => {
            assert_eq!(a.names.len(), 2);
            assert_eq!(a.kind, AliasKind::Prologue);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn globals_and_functions() {
    assert_eq!(
        canonical("global a, b[100], c%, d = -5, e = \"x\" \"y\"; private global f private g"),
        "global a\nglobal b[100]\nglobal c%\nglobal d = -5\nglobal e = \"xy\"\n\
         private global f\nprivate global g\n"
    );
    assert_eq!(
        canonical("function f:long(a:long, b:string, c) { return a } function long() {}"),
        "function f:long(a:long, b:string, c) {\n  return a;\n}\nfunction long() {\n}\n"
    );
}

#[test]
fn statements() {
    assert_eq!(
        body("if (a) b else c\nwhile (x) { x-- }\nfor (i = 0; i < 3; i++) ;\nfor (;;) break"),
        lines(&[
            "if (a) b; else c;",
            "while (x) {",
            "  x--;",
            "}",
            "for (i = 0; i < 3; i++) ;",
            "for (; ; ) break;",
        ])
    );
    assert_eq!(
        body("next; continue\ndelete a[1] delete b\ntry { error(\"x\") } catch (e) { }\n;;"),
        lines(&[
            "next;",
            "continue;",
            "delete a[1];",
            "delete b;",
            "try {",
            "  error(\"x\");",
            "} catch(e) {",
            "}",
            ";",
            ";",
        ])
    );
    assert_eq!(
        canonical("function f() { return; } function g() { if (x) return; else return 1 }"),
        "function f() {\n  return;\n}\nfunction g() {\n  if (x) return; else return 1;\n}\n"
    );
}

#[test]
fn dangling_else_binds_to_nearest_if() {
    let s = parse("probe p { if (a) if (b) c else d }").unwrap();
    let Item::Probe(p) = &s.items[0] else {
        panic!()
    };
    let StmtKind::If { then, else_, .. } = &p.body.stmts[0].kind else {
        panic!()
    };
    assert!(else_.is_none());
    assert!(matches!(&then.kind, StmtKind::If { else_: Some(_), .. }));
}

#[test]
fn foreach_forms() {
    assert_eq!(
        body(
            "foreach (k in a) ;\n\
             foreach ([k1, k2-] in a limit 10) ;\n\
             foreach (v = [k1, k2] in a[*, \"x\"] @sum+) ;\n\
             foreach (v- = k in a) ;\n\
             foreach (b in @hist_log(s)) ;"
        ),
        lines(&[
            "foreach (k in a) ;",
            "foreach ([k1, k2-] in a limit 10) ;",
            "foreach (v = [k1, k2] in a[*, \"x\"] @sum+) ;",
            "foreach (v = k in a-) ;",
            "foreach (b in @hist_log(s)) ;",
        ])
    );
    let s = parse("probe p { foreach ([a, b+] in x) ; }").unwrap();
    let Item::Probe(p) = &s.items[0] else {
        panic!()
    };
    let StmtKind::Foreach(f) = &p.body.stmts[0].kind else {
        panic!()
    };
    assert_eq!(
        f.sort,
        Some(ForeachSort {
            by: SortBy::Key(1),
            descending: false,
            agg: None
        })
    );
}

#[test]
fn precedence() {
    assert_eq!(
        body("x = a + b * c - d . e << 1 < 2 == 3 & 4 ^ 5 | 6 && 7 || 8 ? 9 : 10"),
        lines(&["x = a + b * c - d . e << 1 < 2 == 3 & 4 ^ 5 | 6 && 7 || 8 ? 9 : 10;"])
    );
    assert_eq!(
        body("x = (a + b) * c\ny = a - (b - c)\nz = (a = b) + 1"),
        lines(&["x = (a + b) * c;", "y = a - (b - c);", "z = (a = b) + 1;"])
    );
    assert_eq!(
        body("a = b = c\na ? b : c ? d : e\nx = k in arr && [1, \"s\"] in m"),
        lines(&[
            "a = b = c;",
            "a ? b : c ? d : e;",
            "x = k in arr && [1, \"s\"] in m;"
        ])
    );
    assert_eq!(
        body("x = s =~ \"a.*\"\ny = s !~ \"b\" \"c\""),
        lines(&["x = s =~ \"a.*\";", "y = s !~ \"bc\";"])
    );
    assert_eq!(
        body("x = - -a\ny = ! ~a\nz = -(-1)\nw = +a"),
        lines(&["x = - -a;", "y = ! ~a;", "z = - -1;", "w = +a;"])
    );
}

#[test]
fn values() {
    assert_eq!(
        body(
            "x = 0x1f + 017 + 18446744073709551615\n\
             s = \"a\\tb\\n\\\"q\\\\\\001\\x41\"\n\
             f(1, \"2\", g())\n\
             a[1, \"k\"] = 2"
        ),
        lines(&[
            "x = 31 + 15 + 18446744073709551615;",
            "s = \"a\\tb\\n\\\"q\\\\\\001A\";",
            "f(1, \"2\", g());",
            "a[1, \"k\"] = 2;",
        ])
    );
    assert_eq!(
        body(
            "x <<< 1\n\
             y = @count(x) + @sum(x) + @min(x) + @max(x) + @avg(x) + @variance(x, 4)\n\
             print(@hist_log(x))\nprint(@hist_linear(x, 0, 100, 10))\n\
             z = @hist_log(x)[3]"
        ),
        lines(&[
            "x <<< 1;",
            "y = @count(x) + @sum(x) + @min(x) + @max(x) + @avg(x) + @variance(x, 4);",
            "print(@hist_log(x));",
            "print(@hist_linear(x, 0, 100, 10));",
            "z = @hist_log(x)[3];",
        ])
    );
    assert_eq!(
        body(
            "x = $arg1 + $t->f->function[2]\ny = $$vars . $p$ . $q->r$$\n\
             z = @cast(p, \"task_struct\", \"kernel\")->pid\nd = @defined($x) ? 1 : @entry($y)"
        ),
        lines(&[
            "x = $arg1 + $t->f->function[2];",
            "y = $$vars . $p$ . $q->r$$;",
            "z = @cast(p, \"task_struct\", \"kernel\")->pid;",
            "d = @defined($x) ? 1 : @entry($y);",
        ])
    );
}

#[test]
fn optional_semicolons_are_greedy_like_systemtap() {
    // An expression goes on while the next token can continue it.
    assert_eq!(body("a = b\n-c"), lines(&["a = b - c;"]));
    assert_eq!(body("a = b\n++c"), lines(&["a = b++;", "c;"]));
    assert_eq!(body("f\n(1)"), lines(&["f(1);"]));
    assert_eq!(body("a\n[1] in b"), lines(&["a[1] in b;"]));
    // ... and stops where it cannot.
    assert_eq!(
        body("a--\n--a\n++a\na++"),
        lines(&["a--;", "--a;", "++a;", "a++;"])
    );
    assert_eq!(
        body("a = 1 b = 2 c = \"x\""),
        lines(&["a = 1;", "b = 2;", "c = \"x\";"])
    );
    assert_eq!(body("a ;\n- a"), lines(&["a;", "-a;"]));
    // One `;` belongs to the statement before it; a second is empty.
    assert_eq!(body("a;;"), lines(&["a;", ";"]));
    assert_eq!(
        body("if (c) next; else a"),
        lines(&["if (c) next; else a;"])
    );
    assert_eq!(
        body("if (c) {} ; x"),
        lines(&["if (c) {", "} ;", "x;"]).replace("} ;", "}\n  ;")
    );
}

#[test]
fn preprocessor_and_arguments() {
    let opts = options(vec!["5".into(), "probe".into(), "x y".into()]);
    let (map, r) = parse_with(
        "a.stp",
        "%( arch == \"x86_64\" && $# == 3 %? global a = $1 %: global b %)\n\
         %( kernel_v >= \"6.0\" %? global k %)\n\
         %( systemtap_v < \"4.0\" %? global old %: global new %)\n\
         %( runtime == \"utrace\" %? probe begin { print(@3 . @#) } %)",
        &opts,
    );
    let script =
        r.unwrap_or_else(|d| panic!("{}", utap_compiler::diag::render_all(&d, &map, false)));
    assert_eq!(
        utap_compiler::print::script(&script),
        "global a = 5\nglobal k\nglobal new\nprobe begin {\n  print(\"x y\" . \"3\");\n}\n"
    );
}

#[test]
fn node_ids_are_unique_across_files() {
    let mut map = SourceMap::new();
    let a = map.add("a.stp", "probe begin { x = 1 + 2 }");
    let b = map.add("b.stp", "probe end { y = 3 }");
    let mut ids = NodeIds::default();
    let opts = options(Vec::new());
    let sa = parser::parse_file(&map, a, &opts, &mut ids).unwrap();
    let sb = parser::parse_file(&map, b, &opts, &mut ids).unwrap();
    assert_eq!(ids.count(), 8);
    let first = |s: &Script| match &s.items[0] {
        Item::Probe(p) => match &p.body.stmts[0].kind {
            StmtKind::Expr(e) => e.id,
            _ => panic!(),
        },
        _ => panic!(),
    };
    assert!(first(&sa) != first(&sb));
    assert_eq!(sb.file, b);
}

#[test]
fn tapsets_may_be_empty_scripts_may_not() {
    let mut opts = options(Vec::new());
    opts.tapset = true;
    assert!(
        parse_with("t.stp", "# nothing\n", &opts)
            .1
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        errors("# nothing\n// nor here\n/* nor here */\n"),
        "parse error: input file 't.stp' has no probes, functions or globals (only comments)\n  \
         = help: a script needs at least one probe, function or global\n"
    );
    assert_eq!(
        errors(" \n\n"),
        "parse error: input file 't.stp' is empty\n  \
         = help: a script needs at least one probe, function or global\n"
    );
}

#[test]
fn error_expected_tokens() {
    assert_eq!(
        errors("probe begin {\n  x = \n}\n"),
        "parse error: expected an expression
   ,-[ t.stp:3:1 ]
   |
 3 | }
   | |  
   | `-- found '}'
---'
"
    );
    assert_eq!(
        errors("probe begin { if x }"),
        "parse error: expected '('
   ,-[ t.stp:1:18 ]
   |
 1 | probe begin { if x }
   |                  |  
   |                  `-- found identifier 'x'
---'
"
    );
    assert_eq!(
        errors("\"not a probe\""),
        "parse error: expected 'probe', 'global', 'private', 'function', or '%{'
   ,-[ t.stp:1:1 ]
   |
 1 | \"not a probe\"
   | ^^^^^^|^^^^^^  
   |       `-------- found string \"not a probe\"
---'
"
    );
    assert_eq!(
        errors("probe begin { a +"),
        "parse error: expected an expression
   ,-[ t.stp:1:18 ]
   |
 1 | probe begin { a +
   |                  | 
   |                  `- found end of file
---'
"
    );
}

#[test]
fn error_unterminated_things_point_where_they_began() {
    assert_eq!(
        errors("probe begin {\n  x = \"abc\n}\n"),
        "parse error: Could not find matching closing quote
   ,-[ t.stp:2:7 ]
   |
 2 |   x = \"abc
   |       |  
   |       `-- here
   | 
   | Help: strings end on the line they begin; close it with '\"'
---'
"
    );
    assert_eq!(
        errors("probe begin { /* x\n\n"),
        "parse error: unterminated comment
   ,-[ t.stp:1:15 ]
   |
 1 | probe begin { /* x
   |               ^|  
   |                `-- here
   | 
   | Help: this '/*' comment has no closing '*/'
---'
"
    );
}

#[test]
fn error_messages_from_systemtap() {
    let first_line = |t: &str| errors(t).lines().next().unwrap().to_string();
    assert_eq!(
        first_line("global a[0]"),
        "parse error: array size out of range"
    );
    assert_eq!(
        first_line("global a[2] = 1"),
        "parse error: only scalar globals can be initialized"
    );
    assert_eq!(
        first_line("global a global a"),
        "parse error: duplicate global name"
    );
    assert_eq!(
        first_line("probe p { return 1 }"),
        "parse error: found 'return' not in function context"
    );
    assert_eq!(
        first_line("function f(a, a) {}"),
        "parse error: duplicate parameter names"
    );
    assert_eq!(
        first_line("probe p { printf(x) }"),
        "parse error: expected literal string"
    );
    assert_eq!(
        first_line("probe p { print() }"),
        "parse error: print needs at least one value"
    );
    assert_eq!(
        first_line("probe p { x = @foo(1) }"),
        "parse error: unknown operator @foo"
    );
    assert_eq!(
        first_line("probe p { foreach ([a+, b-] in x) ; }"),
        "parse error: multiple sort directives"
    );
    assert_eq!(
        first_line("probe p { x = @hist_log(y) }"),
        "parse error: base histogram operator where expression expected"
    );
    assert_eq!(
        first_line("probe p? = q {}"),
        "parse error: probe point alias name cannot be optional nor sufficient"
    );
    assert_eq!(
        first_line("probe p { %{ x %} }"),
        "parse error: embedded code in unprivileged script; need utap -g"
    );
    assert_eq!(
        first_line("probe p { x = 0880 }"),
        "parse error: number invalid or out of range"
    );
    assert_eq!(
        first_line("probe p(-9223372036854775809) {}"),
        "parse error: number invalid or out of range"
    );
    assert_eq!(
        first_line("probe p { x = $1 }"),
        "parse error: command line argument out of range [1-0]"
    );
    assert_eq!(
        first_line("%( arch == \"x\" %)"),
        "parse error: expected '%?' marker for conditional"
    );
    assert!(first_line("probe a * b {}").starts_with("parse error: expected"));
    // `return` takes the next token as its value, as in SystemTap.
    assert!(
        first_line("function g() { if (x) return else y }").starts_with("parse error: expected")
    );
}

#[test]
fn guru_mode_allows_embedded_code_through_the_parser() {
    let mut opts = options(Vec::new());
    opts.guru = true;
    let (_, r) = parse_with(
        "t.stp",
        "%{ #include <x> %}\nfunction f() %{ y %}\nprobe p { %{ z %} }",
        &opts,
    );
    assert_eq!(r.unwrap().items.len(), 3);
}

#[test]
fn goes_on_after_an_error_like_systemtap() {
    let text = errors("probe begin { x = }\nglobal 1\nprobe end { y = 1 }\nfunction f( {}\n");
    let headlines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("parse error"))
        .collect();
    assert_eq!(
        headlines,
        vec![
            "parse error: expected an expression",
            "parse error: expected an identifier",
            "parse error: expected an identifier or ')'",
        ]
    );
}

fn first_line_of(text: &str) -> String {
    errors(text).lines().next().unwrap().to_string()
}

#[test]
fn pathological_nesting_is_refused_not_overflowed() {
    let ops = |n: usize| format!("probe p {{ x = {}1 }}", "1+".repeat(n));
    let ifs = |n: usize| format!("probe p {{ {}x }}", "if (1) ".repeat(n));
    let parens = |n: usize| format!("probe p {{ x = {}1{} }}", "(".repeat(n), ")".repeat(n));
    assert!(parse(&ops(999)).is_ok());
    assert!(parse(&ifs(254)).is_ok());
    assert!(parse(&parens(254)).is_ok());
    let else_ifs = |n: usize| format!("probe p {{ if (0) x {}}}", "else if (1) x ".repeat(n));
    assert!(parse(&else_ifs(254)).is_ok());
    assert_eq!(
        first_line_of(&else_ifs(5000)),
        "parse error: nesting too deep: more than 256 levels"
    );
    let first_line = |t: &str| errors(t).lines().next().unwrap().to_string();
    assert_eq!(
        first_line(&ops(5000)),
        "parse error: expression too complex: more than 1000 operators in one statement"
    );
    assert_eq!(
        first_line(&ifs(5000)),
        "parse error: nesting too deep: more than 256 levels"
    );
    assert_eq!(
        first_line(&parens(5000)),
        "parse error: nesting too deep: more than 256 levels"
    );
}

#[test]
fn chains_that_systemtap_rejects() {
    assert_eq!(
        first_line_of("probe p { x = a in b in c }"),
        "parse error: 'in' cannot continue this expression here; use parentheses"
    );
    assert_eq!(
        first_line_of("probe p { x = a < b =~ \"x\" }"),
        "parse error: '=~' cannot continue this expression here; use parentheses"
    );
    assert_eq!(
        first_line_of("probe p { x = [a && b] in c }"),
        "parse error: expected ',' or ']', found '&&'"
    );
    assert_eq!(
        first_line_of("probe p { x = [a] + 1 }"),
        "parse error: expected 'in' after a [key, ...] list"
    );
    assert_eq!(
        body("x = (a in b) in c\ny = (a =~ \"x\") . b"),
        lines(&["x = (a in b) in c;", "y = (a =~ \"x\") . b;"])
    );
}

#[test]
fn every_repeated_parameter_is_reported_where_it_repeats() {
    // Few parameters are compared in place, many through a set: both ways
    // report each repeat, in order.
    let where_ = |text: &str| -> Vec<String> {
        errors(text)
            .lines()
            .filter(|l| l.contains("t.stp:"))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let few = "function f(a, b, a, b, c) {}";
    let many = "function g(p1, p2, p3, p4, p5, p6, p7, p8, p9, p2, p10, p9) {}";
    for (text, cols) in [(few, [18, 21]), (many, [48, 57])] {
        let lines = where_(text);
        assert_eq!(lines.len(), 2, "{text}: {lines:?}");
        for (line, col) in lines.iter().zip(cols) {
            assert!(line.contains(&format!("t.stp:1:{col} ]")), "{text}: {line}");
        }
        let headlines = errors(text)
            .lines()
            .filter(|l| *l == "parse error: duplicate parameter names")
            .count();
        assert_eq!(headlines, 2, "{text}");
    }
}

#[test]
fn ternary_false_branch_is_a_whole_expression() {
    // SystemTap's parse_ternary reads both branches with parse_expression:
    // the assignment belongs to the false branch.
    let s = parse("probe begin { x = c ? ++t : t += 3 }").unwrap();
    let Item::Probe(p) = &s.items[0] else {
        panic!()
    };
    let StmtKind::Expr(e) = &p.body.stmts[0].kind else {
        panic!()
    };
    let ExprKind::Assign { value, .. } = &e.kind else {
        panic!("{e:?}")
    };
    let ExprKind::Ternary { else_, .. } = &value.kind else {
        panic!("{value:?}")
    };
    assert!(matches!(
        else_.kind,
        ExprKind::Assign {
            op: AssignOp::Add,
            ..
        }
    ));
    assert_eq!(
        body("c ? a : b = 3\n(c ? a : b) = 3\nx = c ? 1 : d ? 2 : 3"),
        lines(&[
            "c ? a : b = 3;",
            "(c ? a : b) = 3;",
            "x = c ? 1 : d ? 2 : 3;"
        ])
    );
}

#[test]
fn brace_groups_in_probe_points_expand_in_product_order() {
    assert_eq!(
        canonical("probe syscall.{open,openat,read} {}"),
        "probe syscall.open, syscall.openat, syscall.read {\n}\n"
    );
    assert_eq!(
        canonical("probe {syscall,nd_syscall}.{read,write}.return ? {}"),
        "probe syscall.read.return?, syscall.write.return?, nd_syscall.read.return?, nd_syscall.write.return? {\n}\n"
    );
    // Nested groups, groups holding dotted paths, arguments, conditions.
    assert_eq!(
        canonical(
            r#"probe process("/bin/ls").{begin,{syscall,end}.x} if (a), {timer.ms(10),never} {}"#
        ),
        "probe process(\"/bin/ls\").begin if (a), process(\"/bin/ls\").syscall.x if (a), process(\"/bin/ls\").end.x if (a), timer.ms(10), never {\n}\n"
    );
    // An alias name may use them too.
    let s = parse("probe my.{a,b} = begin {}").unwrap();
    match &s.items[0] {
        Item::Alias(a) => assert_eq!(a.names.len(), 2),
        other => panic!("{other:?}"),
    }
    assert!(parse("probe syscall.{read,write {}").is_err());
}
