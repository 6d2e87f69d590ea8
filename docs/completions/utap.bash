_utap() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="utap"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        utap)
            opts="-e -c -x -o -p -v -l -L -I -D -G -T -s -g -f -j -w -u -t -h -V --exit-status --format --suppress-handler-errors --metrics --generate-man --completions --test --bless --jobs --test-timeout --compatible --skip-badvars --daemon --socket --connect --no-daemon --sessions --detach-session --help-function --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                -e)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -x)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -l)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -L)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -I)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -D)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -G)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -T)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                -f)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --metrics)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --completions)
                    COMPREPLY=($(compgen -W "bash elvish fish powershell zsh" -- "${cur}"))
                    return 0
                    ;;
                --jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -j)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --test-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compatible)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --connect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --detach-session)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --help-function)
                    COMPREPLY=($(compgen -W "abs ansi_clear_screen ansi_cursor_hide ansi_cursor_move ansi_cursor_restore ansi_cursor_save ansi_cursor_show ansi_new_line ansi_reset_color ansi_set_color ansi_set_color2 ansi_set_color3 big_endian2 big_endian4 big_endian8 cmdline_arg cmdline_args cmdline_str cpu cpu_clock_ms cpu_clock_ns cpu_clock_s cpu_clock_us ctime delete_stopwatch egid env_var errno_num errno_p errno_str error euid execname exit get_cycles gettimeofday_ms gettimeofday_ns gettimeofday_s gettimeofday_us gid indent indent_depth int_arg is_return isinstr local_clock_ms local_clock_ns local_clock_s local_clock_us log long_arg longlong_arg max mdelay min pexecname pgrp pid pid2execname pn pointer_arg pp ppfunc ppid print print_char print_ubacktrace print_ubacktrace_brief print_ustack printd printdln printf println probefunc quiesce raise randint read_stopwatch_ms read_stopwatch_ns read_stopwatch_s read_stopwatch_us register resume return_str returnstr returnval s32_arg s64_arg sid signal_name signal_str sprint sprint_ubacktrace sprint_ubacktrace_folded sprint_ustack sprint_ustack_folded sprintd sprintdln sprintf sprintln start_stopwatch stop stop_stopwatch stp_pid str_replace string_quoted stringat strlen strtol substr syscall_name syscall_num system target target_set_pid target_set_report text_str text_strn thread_indent thread_indent_depth tid tokenize tz_ctime tz_gmtoff tz_name u32_arg u64_arg u_register uaddr ubacktrace ucallers udelay uid uint_arg ulong_arg umodname user_buffer_quoted user_char user_int user_long user_short user_string user_string2 user_string_n user_string_n2 user_string_n_quoted user_string_n_warn user_string_quoted user_string_warn ustack usymdata usymname warn" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _utap -o nosort -o bashdefault -o default utap
else
    complete -F _utap -o bashdefault -o default utap
fi

# utap's own cases; clap's _utap above does the rest.
_utap_main() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        -l|-L)
            local IFS=$'\n'
            COMPREPLY=( $(compgen -W "$("${COMP_WORDS[0]}" -l '**' 2>/dev/null)" -- "$cur") )
            return 0 ;;
        -x)
            local d pids=()
            for d in /proc/[0-9]*; do
                [[ -O $d ]] && pids+=("${d#/proc/}")
            done
            COMPREPLY=( $(compgen -W "${pids[*]}" -- "$cur") )
            return 0 ;;
        -e|-c|-o|-p|-I|-D|-G|-T|-s|-f|--format|--metrics|--completions|--compatible|--socket|--detach-session|--help-function)
            _utap "$@"
            return ;;
    esac
    if [[ "$cur" != -* ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=( $(compgen -f -X '!*.stp' -- "$cur") $(compgen -d -- "$cur") )
        return 0
    fi
    _utap "$@"
}
complete -F _utap_main -o bashdefault -o default -o nosort utap
