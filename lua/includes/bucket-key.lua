local function bucket_key(index, bucket)
  return index .. ':' .. bucket
end
