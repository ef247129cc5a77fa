function s = string(x)
% STRING  Octave 7 stand-in for MATLAB's string(): Octave 7 has no string class.
%
% Generic_BFMA_TC.m (Kulisch_Accumulation) turns a char matrix into a string
% array and then only reads it with s{i}, length(s) and length(s{i}).  A column
% cell array of the matrix's rows, untrimmed, gives the same answers to those.
  s = num2cell(x, 2);
end
