# zsh zsh_complete.zsh SCRIPT WORDS...: types each WORDS, then TAB, into an interactive zsh
# (on a pseudo-terminal: zsh/zpty) with the completion SCRIPT loaded; prints "== WORDS" and
# what the line editor showed. Each line is typed once the prompt is back, and read until
# its own marker (tests/cli/test_completions.py).
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT='> '; RPROMPT=''; autoload -U compinit; compinit -u -D; source ${1}"
zpty -w z 'print -- __READY_$((0))__'
zpty -r z line '*__READY_0__*'
zpty -r z line '*> '
shift
integer n=0
for words in "$@"; do
  n+=1
  zpty -n -w z "${words}"$'\t'
  zpty -w z $'\C-u'"print -- __DONE_\$((${n}))__"
  zpty -r z out "*__DONE_${n}__*"
  zpty -r z prompt '*> '
  print -r -- "== ${words}"
  print -r -- "$out"
done
zpty -d z
