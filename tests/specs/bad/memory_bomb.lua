-- expect: the spec used more than 64 MiB of memory
local s = string.rep("x", 1e9)
return { mesh = { q = 1 }, model = {} }
