function r = bitshift(a, n, varargin)
% BITSHIFT  Shadow of Octave 7's bitshift() with MATLAB's answers where they differ.
%
% Two differences matter to Generic_BFMA_TC.m:
% - empty operands: MATLAB returns an empty array; Octave 7 raises "K must be a
%   scalar or array of integers" (AlignSignficand on a block with no non-zero
%   product);
% - wide shifts: for an integer class, MATLAB gives 0 when the count's magnitude
%   reaches the width (every bit is shifted out); Octave 7 takes the count modulo
%   the width (bitshift(uint64(2^24), -140) is 4096), which AddTwoNonNormSums
%   (MI300MC's late partial sum, shifts up to 532) runs into.
% Everything else goes to the built-in.
  if isempty(a) || isempty(n)
    r = a([]);
    return
  end
  widths = struct('uint8', 8, 'int8', 8, 'uint16', 16, 'int16', 16, ...
                  'uint32', 32, 'int32', 32, 'uint64', 64, 'int64', 64);
  if ~isinteger(a)
    r = builtin('bitshift', a, n, varargin{:});
    return
  end
  big = abs(double(n)) >= widths.(class(a));
  if ~any(big(:))
    r = builtin('bitshift', a, n, varargin{:});
    return
  end
  if isscalar(n)
    r = zeros(size(a), class(a));
    return
  end
  if isscalar(a)
    a = repmat(a, size(n));
  end
  n(big) = 0;
  r = builtin('bitshift', a, n, varargin{:});
  r(big) = 0;
end
