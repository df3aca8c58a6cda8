local C = 2 ^ 6 // 1
local function mult(n) return n * 4 end
local t = {} for i = 1, 100 do t[#t + 1] = i end
table.insert(t, 1, 0) table.remove(t)
assert(table.concat({'a', 'b'}, ',') == 'a,b' and utf8.len('x') == 1)
local ok, e = pcall(error, { code = 1 })
local s = string.format('%5.2f %q %s', 1.5, 'x', tostring(nil)) .. string.rep('ab', 3, '-')
local u = utf8.char(72, 233) .. string.char(65):lower():upper():reverse():sub(1, 1)
local p = string.pack('<i4', 7) local q = string.unpack('<i4', p)
return { name = string.format('m%d', math.floor(C)), mesh = { q = 2, d = 1 }, mode = 'train',
  model = { layers = #t // 100, hidden = math.tointeger(C), heads = 4, ffn = mult(C), seq = 8, batch = 2, eps = 1e-5 },
  optimizer = { lr = 1e-3, weight_decay = 0 }, backends = { 'cpu' }, dtype = 'fp32' }
