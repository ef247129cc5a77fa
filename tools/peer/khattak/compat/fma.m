function r = fma(a, b, c)
% FMA  Octave 7 stand-in for MATLAB's fma() (absent from Octave 7): a*b + c
% rounded once, to nearest even.
%
% Generic_BFMA_TC.m (pws_fma, pws_main) calls it with single operands (MATLAB
% then returns a single), which is the only case supported here.  Every
% operand's value must be a single: the product of two singles is exact in a
% double; TwoSum gives the double sum s and its exact error e; rounding s + e
% to odd at double precision (53 >= 24 + 2 bits) and then to single, to
% nearest even, gives the correctly rounded single result.
  if ~(isa(a, 'single') || isa(b, 'single') || isa(c, 'single'))
    error('compat fma: only the single-precision case is provided');
  end
  sz = size(a .* b .* c);
  a = double(a) .* ones(sz); b = double(b) .* ones(sz); c = double(c) .* ones(sz);
  if any(double(single(a(:))) ~= a(:)) || any(double(single(b(:))) ~= b(:)) || ...
     any(double(single(c(:))) ~= c(:))
    error('compat fma: an operand is not a single value');
  end
  r = zeros(sz, 'single');
  for i = 1:numel(r)
    p = a(i) * b(i);                       % exact: 24 + 24 bits
    if ~isfinite(p) || ~isfinite(c(i))
      r(i) = single(p + c(i));
      continue
    end
    s = p + c(i);
    bp = s - p;
    e = (p - (s - bp)) + (c(i) - bp);      % s + e == p + c exactly
    if e ~= 0 && isfinite(s)
      u = typecast(s, 'uint64');
      if bitand(u, uint64(1)) == 0          % round to odd: move to the odd neighbour toward e
        if (e > 0) == (s > 0)
          u = u + uint64(1);
        else
          u = u - uint64(1);
        end
        s = typecast(u, 'double');
      end
    end
    r(i) = single(s);
  end
end
