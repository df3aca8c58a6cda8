-- expect: syntax_error.lua:4: unexpected symbol near '='
return {
  mesh  = { q = 2 },
  model = { layers = = 2 },
}
